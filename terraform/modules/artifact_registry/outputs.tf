output "repository_id" {
  description = "Repository resource ID (projects/<P>/locations/<L>/repositories/<R>)."
  value       = google_artifact_registry_repository.this.id
}

output "repository_name" {
  description = "Repository short name (for IAM bindings)."
  value       = google_artifact_registry_repository.this.name
}

output "location" {
  description = "Repository location."
  value       = google_artifact_registry_repository.this.location
}

output "docker_repository_url" {
  description = "Image path prefix: <location>-docker.pkg.dev/<project>/<repository>; images are <url>/<image>:<tag>."
  value       = "${var.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.this.repository_id}"
}

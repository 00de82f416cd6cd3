# Docker repository holding the beam_dp image (Flex Template launcher + SDK worker container).

resource "google_artifact_registry_repository" "this" {
  project       = var.project_id
  location      = var.location
  repository_id = var.repository_id
  format        = "DOCKER"
  description   = "beam_dp Dataflow Flex Template images (launcher and SDK worker container)."
  kms_key_name  = var.kms_key_name
  labels        = var.labels

  docker_config {
    immutable_tags = var.immutable_tags
  }
}

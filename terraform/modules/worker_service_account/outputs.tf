output "email" {
  description = "Worker service account email; pass it as the job's service_account_email."
  value       = google_service_account.worker.email
}

output "name" {
  description = "Worker service account resource name (projects/<P>/serviceAccounts/<email>)."
  value       = google_service_account.worker.name
}

output "member" {
  description = "IAM member string of the worker (serviceAccount:<email>)."
  value       = local.member
}

output "project_roles" {
  description = "Project-level roles granted to the worker (only roles/dataflow.worker)."
  value       = local.project_roles
}

output "bucket_names" {
  description = "Bucket names keyed by purpose: staging, temp, templates, ledger."
  value       = { for k, b in google_storage_bucket.this : k => b.name }
}

output "staging_location" {
  description = "gs:// path for Dataflow's staging_location."
  value       = "${google_storage_bucket.this["staging"].url}/staging"
}

output "temp_location" {
  description = "gs:// path for Dataflow's temp_location."
  value       = "${google_storage_bucket.this["temp"].url}/tmp"
}

output "templates_url" {
  description = "gs:// URL of the templates bucket; Flex Template spec files go under it."
  value       = google_storage_bucket.this["templates"].url
}

output "ledger_bucket" {
  description = "Name of the privacy ledger bucket; each job keeps its ledger under its own prefix (gs://<bucket>/<job>), readable and writable by that job's worker only."
  value       = google_storage_bucket.this["ledger"].name
}

output "ledger_url" {
  description = "gs:// URL of the privacy ledger bucket."
  value       = google_storage_bucket.this["ledger"].url
}

output "job_id" {
  description = "Dataflow job ID."
  value       = google_dataflow_flex_template_job.this.job_id
}

output "job_name" {
  description = "Dataflow job name."
  value       = google_dataflow_flex_template_job.this.name
}

output "state" {
  description = "Job state as last read by Terraform (e.g. JOB_STATE_RUNNING)."
  value       = google_dataflow_flex_template_job.this.state
}

output "parameters" {
  description = "Template parameters the job was launched with (privacy parameters included; no secrets)."
  value       = local.job_parameters
}

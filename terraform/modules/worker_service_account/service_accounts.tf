# The one worker identity of one pipeline. It is also the identity of the Flex Template launcher
# VM, which reads the template spec, pulls the image and stages the job.
resource "google_service_account" "worker" {
  project      = var.project_id
  account_id   = var.account_id
  display_name = var.display_name
  description  = "Least-privilege Dataflow worker and Flex Template launcher identity for one beam_dp pipeline (managed by Terraform)."
}

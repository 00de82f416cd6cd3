# One beam_dp streaming job launched from a Flex Template. The privacy budget arrives as typed,
# validated numbers and is merged last, so the free-form parameters map can never override it.

locals {
  # delta is omitted for a pure-epsilon job (null), whose pipeline takes no --delta.
  dp_parameters = { for k, v in {
    epsilon = var.epsilon
    delta   = var.delta
  } : k => tostring(v) if v != null }

  job_parameters = merge(
    { for k, v in var.parameters : k => v if v != null },
    local.dp_parameters,
  )
}

resource "google_dataflow_flex_template_job" "this" {
  project                 = var.project_id
  region                  = var.region
  name                    = var.name
  container_spec_gcs_path = var.container_spec_gcs_path
  sdk_container_image     = var.sdk_container_image
  parameters              = local.job_parameters

  # A streaming job: keep its in-flight releases on destroy/replace.
  on_delete                    = var.on_delete
  skip_wait_on_job_termination = false
  enable_streaming_engine      = var.enable_streaming_engine

  service_account_email = var.service_account_email
  subnetwork            = var.subnetwork
  ip_configuration      = var.use_public_ips ? "WORKER_IP_PUBLIC" : "WORKER_IP_PRIVATE"
  kms_key_name          = var.kms_key_name

  temp_location          = var.temp_location
  staging_location       = var.staging_location
  machine_type           = var.machine_type
  launcher_machine_type  = var.launcher_machine_type
  num_workers            = var.num_workers
  max_workers            = var.max_workers
  autoscaling_algorithm  = "THROUGHPUT_BASED"
  additional_experiments = var.additional_experiments
  labels                 = var.labels
}

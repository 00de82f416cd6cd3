output "image_repository" {
  description = "Artifact Registry path to push the images to (<repo>/continual-counts, pmwg-queries, boost-queries, erm-digits:<tag>)."
  value       = local.image_repo
}

output "continual_counts_image" {
  description = "Image reference the continual_counts template and workers use."
  value       = local.continual_counts_image
}

output "continual_counts_template_path" {
  description = "gs:// path to write the continual_counts Flex Template spec to (gcloud dataflow flex-template build)."
  value       = local.continual_counts_template
}

output "pmwg_queries_image" {
  description = "Image reference the pmwg_queries template and workers use."
  value       = local.pmwg_queries_image
}

output "pmwg_queries_template_path" {
  description = "gs:// path to write the pmwg_queries Flex Template spec to."
  value       = local.pmwg_queries_template
}

output "bucket_names" {
  description = "Staging, temp and templates bucket names."
  value       = module.buckets.bucket_names
}

output "staging_location" {
  description = "Dataflow staging_location."
  value       = module.buckets.staging_location
}

output "temp_location" {
  description = "Dataflow temp_location."
  value       = module.buckets.temp_location
}

output "continual_counts_input_topic" {
  description = "Topic to publish continual_counts input records to."
  value       = module.continual_counts_pubsub.input_topic_ids["input"]
}

output "continual_counts_output_subscription" {
  description = "Subscription to pull continual_counts releases from."
  value       = module.continual_counts_pubsub.output_subscription_name
}

output "continual_counts_dead_letter_subscription" {
  description = "Subscription to pull continual_counts dead letters from."
  value       = module.continual_counts_pubsub.dead_letter_subscription_name
}

output "continual_counts_worker_email" {
  description = "Worker service account of the continual_counts job."
  value       = module.continual_counts_worker.email
}

output "continual_counts_job_id" {
  description = "Dataflow job ID of continual_counts (null until launch_jobs = true)."
  value       = one(module.continual_counts_job[*].job_id)
}

output "pmwg_queries_topics" {
  description = "Topics to publish pmwg_queries data and queries to (null unless enable_pmwg_queries)."
  value       = one(module.pmwg_queries_pubsub[*].input_topic_ids)
}

output "pmwg_queries_output_subscription" {
  description = "Subscription to pull pmwg_queries answers from (null unless enable_pmwg_queries)."
  value       = one(module.pmwg_queries_pubsub[*].output_subscription_name)
}

output "pmwg_queries_job_id" {
  description = "Dataflow job ID of pmwg_queries (null unless enabled and launched)."
  value       = one(module.pmwg_queries_job[*].job_id)
}

output "noise_key_secrets" {
  description = "Secret Manager secrets of the jobs' noise keys (add a version to each before launching: openssl rand -hex 32 | gcloud secrets versions add <id> --data-file=-); only the job's worker can read it."
  value = {
    continual_counts = google_secret_manager_secret.continual_counts_noise_key.id
    pmwg_queries     = var.enable_pmwg_queries ? google_secret_manager_secret.pmwg_queries_noise_key[0].id : null
    boost_queries    = var.enable_boost_queries ? google_secret_manager_secret.boost_queries_noise_key[0].id : null
    erm_digits       = var.enable_erm_digits ? google_secret_manager_secret.erm_digits_noise_key[0].id : null
    yaml             = var.enable_yaml_job ? google_secret_manager_secret.yaml_noise_key[0].id : null
  }
}

output "ledgers" {
  description = "The jobs' privacy ledgers (gs:// prefixes, docs/privacy_model.md); list a stream's runs with: python -m beam_dp.ledger_store show <ledger> --stream_id=<stream_id>."
  value = {
    continual_counts = "${module.buckets.ledger_url}/continual_counts"
    pmwg_queries     = var.enable_pmwg_queries ? "${module.buckets.ledger_url}/pmwg_queries" : null
    boost_queries    = var.enable_boost_queries ? "${module.buckets.ledger_url}/boost_queries" : null
    erm_digits       = var.enable_erm_digits ? "${module.buckets.ledger_url}/erm_digits" : null
    yaml             = var.enable_yaml_job ? "${module.buckets.ledger_url}/yaml" : null
  }
}

output "boost_queries_image" {
  description = "Image reference the boost_queries template and workers use."
  value       = local.boost_queries_image
}

output "boost_queries_template_path" {
  description = "gs:// path to write the boost_queries Flex Template spec to."
  value       = local.boost_queries_template
}

output "boost_queries_topics" {
  description = "Topics to publish boost_queries data and queries to (null unless enable_boost_queries)."
  value       = one(module.boost_queries_pubsub[*].input_topic_ids)
}

output "boost_queries_output_subscription" {
  description = "Subscription to pull boost_queries releases from (null unless enable_boost_queries)."
  value       = one(module.boost_queries_pubsub[*].output_subscription_name)
}

output "boost_queries_job_id" {
  description = "Dataflow job ID of boost_queries (null unless enabled and launched)."
  value       = one(module.boost_queries_job[*].job_id)
}

output "erm_digits_image" {
  description = "Image reference the erm_digits template and workers use."
  value       = local.erm_digits_image
}

output "erm_digits_template_path" {
  description = "gs:// path to write the erm_digits Flex Template spec to."
  value       = local.erm_digits_template
}

output "erm_digits_topics" {
  description = "Topics to publish erm_digits examples to (null unless enable_erm_digits)."
  value       = one(module.erm_digits_pubsub[*].input_topic_ids)
}

output "erm_digits_output_subscription" {
  description = "Subscription to pull erm_digits releases from (null unless enable_erm_digits)."
  value       = one(module.erm_digits_pubsub[*].output_subscription_name)
}

output "erm_digits_job_id" {
  description = "Dataflow job ID of erm_digits (null unless enabled and launched)."
  value       = one(module.erm_digits_job[*].job_id)
}

output "yaml_image" {
  description = "Image reference the yaml template and workers use."
  value       = local.yaml_image
}

output "yaml_template_path" {
  description = "gs:// path to write the yaml Flex Template spec to."
  value       = local.yaml_template
}

output "yaml_topics" {
  description = "Topics to publish the yaml job's input to (null unless enable_yaml_job)."
  value       = one(module.yaml_pubsub[*].input_topic_ids)
}

output "yaml_output_subscription" {
  description = "Subscription to pull the yaml job's releases from (null unless enable_yaml_job)."
  value       = one(module.yaml_pubsub[*].output_subscription_name)
}

output "yaml_job_id" {
  description = "Dataflow job ID of the yaml job (null unless enabled and launched)."
  value       = one(module.yaml_job[*].job_id)
}

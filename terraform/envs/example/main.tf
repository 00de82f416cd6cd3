# Example root module: everything one project needs to run beam_dp's streaming jobs on Dataflow.
#
# Two applies (docs/deploy.md): the first (launch_jobs = false) creates the buckets, the image
# repository, the Pub/Sub plumbing and the worker identities; then the images and Flex Template
# specs are built into them; the second (launch_jobs = true) launches the jobs.
#
# State is local by default. For shared use, add a backend, e.g.
#   terraform { backend "gcs" { bucket = "<state-bucket>" prefix = "beam-dp/example" } }

provider "google" {
  project = var.project_id
  region  = var.region
}

locals {
  bucket_prefix = coalesce(var.bucket_prefix, "${var.project_id}-beam-dp")
  image_repo    = module.artifact_registry.docker_repository_url

  continual_counts_image    = "${local.image_repo}/continual-counts:${var.image_tag}"
  continual_counts_template = "${module.buckets.templates_url}/templates/continual_counts.json"
  pmwg_queries_image        = "${local.image_repo}/pmwg-queries:${var.image_tag}"
  pmwg_queries_template     = "${module.buckets.templates_url}/templates/pmwg_queries.json"
  boost_queries_image       = "${local.image_repo}/boost-queries:${var.image_tag}"
  boost_queries_template    = "${module.buckets.templates_url}/templates/boost_queries.json"
  erm_digits_image          = "${local.image_repo}/erm-digits:${var.image_tag}"
  erm_digits_template       = "${module.buckets.templates_url}/templates/erm_digits.json"
  yaml_image                = "${local.image_repo}/yaml:${var.image_tag}"
  yaml_template             = "${module.buckets.templates_url}/templates/yaml.json"

  # Each job's worker reads and writes only staging and temp, and reads only the templates bucket.
  read_write_buckets = {
    staging = module.buckets.bucket_names["staging"]
    temp    = module.buckets.bucket_names["temp"]
  }
  read_only_buckets = {
    templates = module.buckets.bucket_names["templates"]
  }
  repository = {
    project  = var.project_id
    location = module.artifact_registry.location
    name     = module.artifact_registry.repository_name
  }
}

module "buckets" {
  source = "../../modules/buckets"

  project_id    = var.project_id
  name_prefix   = local.bucket_prefix
  location      = var.region
  force_destroy = var.force_destroy_buckets
  labels        = var.labels
}

module "artifact_registry" {
  source = "../../modules/artifact_registry"

  project_id    = var.project_id
  location      = var.region
  repository_id = "${var.name_prefix}-images"
  labels        = var.labels
}

# ---------------------------------------------------------------------------------------------
# continual_counts
# ---------------------------------------------------------------------------------------------

module "continual_counts_pubsub" {
  source = "../../modules/pubsub"

  project_id  = var.project_id
  name_prefix = "${var.name_prefix}-counts"
  input_names = ["input"]
  labels      = var.labels
}

# The job's secret noise key (docs/privacy_model.md): a Secret Manager secret that only the
# worker service account can read. Terraform creates the secret, never its value (a version in
# Terraform would put the key in the state): add one with
#   openssl rand -hex 32 | gcloud secrets versions add <secret_id> --data-file=-
# The job gets a reference pinned to one version (--noise_key=gcpsm:.../versions/N, N from
# var.noise_key_versions), never the key; an alias such as "latest" is refused, since a restarted
# worker could resolve it to another key.
resource "google_secret_manager_secret" "continual_counts_noise_key" {
  project   = var.project_id
  secret_id = "${var.name_prefix}-counts-noise-key"
  labels    = var.labels

  replication {
    auto {}
  }
}

# The job's privacy ledger (docs/privacy_model.md): its prefix of the ledger bucket, marked as a
# ledger (the job refuses a path without the marker, so that a typo never starts an empty
# ledger). Only the job's worker can read or write under it.
resource "google_storage_bucket_object" "continual_counts_ledger" {
  bucket       = module.buckets.ledger_bucket
  name         = "continual_counts/beam_dp_ledger.json"
  content      = jsonencode({ format = "beam_dp.privacy_ledger", version = 1 })
  content_type = "application/json"
}

module "continual_counts_worker" {
  source = "../../modules/worker_service_account"

  project_id         = var.project_id
  account_id         = "${var.name_prefix}-counts-worker"
  display_name       = "beam_dp continual_counts worker"
  read_write_buckets = local.read_write_buckets
  read_only_buckets  = local.read_only_buckets
  subscriptions = {
    input = module.continual_counts_pubsub.input_subscription_ids["input"]
  }
  publish_topics = {
    output      = module.continual_counts_pubsub.output_topic_id
    dead_letter = module.continual_counts_pubsub.dead_letter_topic_id
  }
  secrets = {
    noise_key = google_secret_manager_secret.continual_counts_noise_key.id
  }
  ledger = {
    bucket = module.buckets.ledger_bucket
    prefix = "continual_counts"
  }
  artifact_registry_repository = local.repository
  deployer_member              = var.deployer_member
}

module "continual_counts_job" {
  source = "../../modules/dataflow_flex_job"
  count  = var.launch_jobs ? 1 : 0

  project_id              = var.project_id
  region                  = var.region
  name                    = "${var.name_prefix}-continual-counts"
  container_spec_gcs_path = local.continual_counts_template
  sdk_container_image     = local.continual_counts_image
  service_account_email   = module.continual_counts_worker.email
  subnetwork              = var.subnetwork
  use_public_ips          = false
  on_delete               = "drain"
  temp_location           = module.buckets.temp_location
  staging_location        = module.buckets.staging_location
  max_workers             = var.max_workers
  labels                  = var.labels

  epsilon = var.continual_counts.epsilon
  delta   = var.continual_counts.delta
  parameters = {
    input_subscription         = module.continual_counts_pubsub.input_subscription_ids["input"]
    output_topic               = module.continual_counts_pubsub.output_topic_id
    dead_letter_topic          = module.continual_counts_pubsub.dead_letter_topic_id
    step_seconds               = tostring(var.continual_counts.step_seconds)
    allowed_lateness_seconds   = tostring(var.continual_counts.allowed_lateness_seconds)
    public_keys                = join(",", var.continual_counts.public_keys)
    max_contributions_per_step = tostring(var.continual_counts.max_contributions_per_step)
    max_keys_per_unit          = tostring(var.continual_counts.max_keys_per_unit)
    max_steps_per_unit         = tostring(var.continual_counts.max_steps_per_unit)
    horizon_steps              = var.continual_counts.horizon_steps == null ? null : tostring(var.continual_counts.horizon_steps)
    mechanism                  = var.continual_counts.mechanism
    estimator                  = var.continual_counts.estimator
    timestamp_attribute        = var.continual_counts.timestamp_attribute
    input_avro                 = var.continual_counts.input_avro
    output_avro                = var.continual_counts.output_avro
    dead_letter_avro           = var.continual_counts.dead_letter_avro
    public_keys_file           = var.continual_counts.public_keys_file
    start                      = var.continual_counts.start
    end                        = var.continual_counts.end
    num_shards                 = var.continual_counts.num_shards == null ? null : tostring(var.continual_counts.num_shards)
    progress_every             = var.continual_counts.progress_every == null ? null : tostring(var.continual_counts.progress_every)
    noise_key                  = "gcpsm:${google_secret_manager_secret.continual_counts_noise_key.id}/versions/${var.noise_key_versions.continual_counts}"
    stream_id                  = coalesce(var.continual_counts.stream_id, "${var.project_id}/${var.name_prefix}/continual_counts")
    lateness                   = var.continual_counts.lateness
    ledger                     = "${module.buckets.ledger_url}/continual_counts"
    resume                     = var.continual_counts.resume == null ? null : tostring(var.continual_counts.resume)
    lifetime_epsilon           = var.continual_counts.lifetime_epsilon == null ? null : tostring(var.continual_counts.lifetime_epsilon)
    lifetime_delta             = var.continual_counts.lifetime_delta == null ? null : tostring(var.continual_counts.lifetime_delta)
    lifetime_rho               = var.continual_counts.lifetime_rho == null ? null : tostring(var.continual_counts.lifetime_rho)
  }

  # The workers' permissions and the ledger must exist before the launcher VM starts.
  depends_on = [module.continual_counts_worker, google_storage_bucket_object.continual_counts_ledger]
}

# ---------------------------------------------------------------------------------------------
# pmwg_queries (optional)
# ---------------------------------------------------------------------------------------------

module "pmwg_queries_pubsub" {
  source = "../../modules/pubsub"
  count  = var.enable_pmwg_queries ? 1 : 0

  project_id  = var.project_id
  name_prefix = "${var.name_prefix}-pmwg"
  input_names = ["data", "queries"]
  labels      = var.labels
}

resource "google_secret_manager_secret" "pmwg_queries_noise_key" {
  count = var.enable_pmwg_queries ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name_prefix}-pmwg-noise-key"
  labels    = var.labels

  replication {
    auto {}
  }
}

resource "google_storage_bucket_object" "pmwg_queries_ledger" {
  count = var.enable_pmwg_queries ? 1 : 0

  bucket       = module.buckets.ledger_bucket
  name         = "pmwg_queries/beam_dp_ledger.json"
  content      = jsonencode({ format = "beam_dp.privacy_ledger", version = 1 })
  content_type = "application/json"
}

module "pmwg_queries_worker" {
  source = "../../modules/worker_service_account"
  count  = var.enable_pmwg_queries ? 1 : 0

  project_id         = var.project_id
  account_id         = "${var.name_prefix}-pmwg-worker"
  display_name       = "beam_dp pmwg_queries worker"
  read_write_buckets = local.read_write_buckets
  read_only_buckets  = local.read_only_buckets
  subscriptions = {
    data    = module.pmwg_queries_pubsub[0].input_subscription_ids["data"]
    queries = module.pmwg_queries_pubsub[0].input_subscription_ids["queries"]
  }
  publish_topics = {
    output      = module.pmwg_queries_pubsub[0].output_topic_id
    dead_letter = module.pmwg_queries_pubsub[0].dead_letter_topic_id
  }
  secrets = {
    noise_key = google_secret_manager_secret.pmwg_queries_noise_key[0].id
  }
  ledger = {
    bucket = module.buckets.ledger_bucket
    prefix = "pmwg_queries"
  }
  artifact_registry_repository = local.repository
  deployer_member              = var.deployer_member
}

module "pmwg_queries_job" {
  source = "../../modules/dataflow_flex_job"
  count  = var.enable_pmwg_queries && var.launch_jobs ? 1 : 0

  project_id              = var.project_id
  region                  = var.region
  name                    = "${var.name_prefix}-pmwg-queries"
  container_spec_gcs_path = local.pmwg_queries_template
  sdk_container_image     = local.pmwg_queries_image
  service_account_email   = module.pmwg_queries_worker[0].email
  subnetwork              = var.subnetwork
  use_public_ips          = false
  on_delete               = "drain"
  temp_location           = module.buckets.temp_location
  staging_location        = module.buckets.staging_location
  max_workers             = var.max_workers
  labels                  = var.labels

  epsilon = var.pmwg_queries.epsilon
  delta   = var.pmwg_queries.delta
  parameters = {
    data_subscription  = module.pmwg_queries_pubsub[0].input_subscription_ids["data"]
    query_subscription = module.pmwg_queries_pubsub[0].input_subscription_ids["queries"]
    output_topic       = module.pmwg_queries_pubsub[0].output_topic_id
    dead_letter_topic  = module.pmwg_queries_pubsub[0].dead_letter_topic_id
    alpha              = tostring(var.pmwg_queries.alpha)
    beta               = tostring(var.pmwg_queries.beta)
    domain_size        = tostring(var.pmwg_queries.domain_size)
    window_seconds     = tostring(var.pmwg_queries.window_seconds)
    start              = var.pmwg_queries.start
    step_seconds       = tostring(var.pmwg_queries.step_seconds)
    end                = var.pmwg_queries.end
    data_avro          = var.pmwg_queries.data_avro
    query_avro         = var.pmwg_queries.query_avro
    output_avro        = var.pmwg_queries.output_avro
    dead_letter_avro   = var.pmwg_queries.dead_letter_avro
    noise_key          = "gcpsm:${google_secret_manager_secret.pmwg_queries_noise_key[0].id}/versions/${var.noise_key_versions.pmwg_queries}"
    stream_id          = coalesce(var.pmwg_queries.stream_id, "${var.project_id}/${var.name_prefix}/pmwg_queries")
    ledger             = "${module.buckets.ledger_url}/pmwg_queries"
    resume             = var.pmwg_queries.resume == null ? null : tostring(var.pmwg_queries.resume)
    lifetime_epsilon   = var.pmwg_queries.lifetime_epsilon == null ? null : tostring(var.pmwg_queries.lifetime_epsilon)
    lifetime_delta     = var.pmwg_queries.lifetime_delta == null ? null : tostring(var.pmwg_queries.lifetime_delta)
    lifetime_rho       = var.pmwg_queries.lifetime_rho == null ? null : tostring(var.pmwg_queries.lifetime_rho)
  }

  depends_on = [module.pmwg_queries_worker, google_storage_bucket_object.pmwg_queries_ledger]
}

# ---------------------------------------------------------------------------------------------
# boost_queries (optional)
# ---------------------------------------------------------------------------------------------

module "boost_queries_pubsub" {
  source = "../../modules/pubsub"
  count  = var.enable_boost_queries ? 1 : 0

  project_id  = var.project_id
  name_prefix = "${var.name_prefix}-boost"
  input_names = ["data", "queries"]
  labels      = var.labels
}

resource "google_secret_manager_secret" "boost_queries_noise_key" {
  count = var.enable_boost_queries ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name_prefix}-boost-noise-key"
  labels    = var.labels

  replication {
    auto {}
  }
}

resource "google_storage_bucket_object" "boost_queries_ledger" {
  count = var.enable_boost_queries ? 1 : 0

  bucket       = module.buckets.ledger_bucket
  name         = "boost_queries/beam_dp_ledger.json"
  content      = jsonencode({ format = "beam_dp.privacy_ledger", version = 1 })
  content_type = "application/json"
}

module "boost_queries_worker" {
  source = "../../modules/worker_service_account"
  count  = var.enable_boost_queries ? 1 : 0

  project_id         = var.project_id
  account_id         = "${var.name_prefix}-boost-worker"
  display_name       = "beam_dp boost_queries worker"
  read_write_buckets = local.read_write_buckets
  read_only_buckets  = local.read_only_buckets
  subscriptions = {
    data    = module.boost_queries_pubsub[0].input_subscription_ids["data"]
    queries = module.boost_queries_pubsub[0].input_subscription_ids["queries"]
  }
  publish_topics = {
    output      = module.boost_queries_pubsub[0].output_topic_id
    dead_letter = module.boost_queries_pubsub[0].dead_letter_topic_id
  }
  secrets = {
    noise_key = google_secret_manager_secret.boost_queries_noise_key[0].id
  }
  ledger = {
    bucket = module.buckets.ledger_bucket
    prefix = "boost_queries"
  }
  artifact_registry_repository = local.repository
  deployer_member              = var.deployer_member
}

module "boost_queries_job" {
  source = "../../modules/dataflow_flex_job"
  count  = var.enable_boost_queries && var.launch_jobs ? 1 : 0

  project_id              = var.project_id
  region                  = var.region
  name                    = "${var.name_prefix}-boost-queries"
  container_spec_gcs_path = local.boost_queries_template
  sdk_container_image     = local.boost_queries_image
  service_account_email   = module.boost_queries_worker[0].email
  subnetwork              = var.subnetwork
  use_public_ips          = false
  on_delete               = "drain"
  temp_location           = module.buckets.temp_location
  staging_location        = module.buckets.staging_location
  max_workers             = var.max_workers
  labels                  = var.labels

  epsilon = var.boost_queries.epsilon
  delta   = var.boost_queries.delta
  parameters = {
    data_subscription        = module.boost_queries_pubsub[0].input_subscription_ids["data"]
    query_subscription       = module.boost_queries_pubsub[0].input_subscription_ids["queries"]
    output_topic             = module.boost_queries_pubsub[0].output_topic_id
    dead_letter_topic        = module.boost_queries_pubsub[0].dead_letter_topic_id
    alpha                    = var.boost_queries.alpha == null ? null : tostring(var.boost_queries.alpha)
    beta                     = var.boost_queries.beta == null ? null : tostring(var.boost_queries.beta)
    preset                   = var.boost_queries.preset
    blocks                   = var.boost_queries.blocks == null ? null : tostring(var.boost_queries.blocks)
    noise                    = var.boost_queries.noise
    cache_capacity           = var.boost_queries.cache_capacity == null ? null : tostring(var.boost_queries.cache_capacity)
    retention_blocks         = var.boost_queries.retention_blocks == null ? null : tostring(var.boost_queries.retention_blocks)
    replay_retention_seconds = var.boost_queries.replay_retention_seconds == null ? null : tostring(var.boost_queries.replay_retention_seconds)
    data_avro                = var.boost_queries.data_avro
    query_avro               = var.boost_queries.query_avro
    output_avro              = var.boost_queries.output_avro
    dead_letter_avro         = var.boost_queries.dead_letter_avro
    noise_key                = "gcpsm:${google_secret_manager_secret.boost_queries_noise_key[0].id}/versions/${var.noise_key_versions.boost_queries}"
    stream_id                = coalesce(var.boost_queries.stream_id, "${var.project_id}/${var.name_prefix}/boost_queries")
    ledger                   = "${module.buckets.ledger_url}/boost_queries"
    resume                   = var.boost_queries.resume == null ? null : tostring(var.boost_queries.resume)
    lifetime_epsilon         = var.boost_queries.lifetime_epsilon == null ? null : tostring(var.boost_queries.lifetime_epsilon)
    lifetime_delta           = var.boost_queries.lifetime_delta == null ? null : tostring(var.boost_queries.lifetime_delta)
    lifetime_rho             = var.boost_queries.lifetime_rho == null ? null : tostring(var.boost_queries.lifetime_rho)
  }

  depends_on = [module.boost_queries_worker, google_storage_bucket_object.boost_queries_ledger]
}

# ---------------------------------------------------------------------------------------------
# erm_digits (optional)
# ---------------------------------------------------------------------------------------------

module "erm_digits_pubsub" {
  source = "../../modules/pubsub"
  count  = var.enable_erm_digits ? 1 : 0

  project_id  = var.project_id
  name_prefix = "${var.name_prefix}-erm"
  input_names = ["input"]
  labels      = var.labels
}

resource "google_secret_manager_secret" "erm_digits_noise_key" {
  count = var.enable_erm_digits ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name_prefix}-erm-noise-key"
  labels    = var.labels

  replication {
    auto {}
  }
}

resource "google_storage_bucket_object" "erm_digits_ledger" {
  count = var.enable_erm_digits ? 1 : 0

  bucket       = module.buckets.ledger_bucket
  name         = "erm_digits/beam_dp_ledger.json"
  content      = jsonencode({ format = "beam_dp.privacy_ledger", version = 1 })
  content_type = "application/json"
}

module "erm_digits_worker" {
  source = "../../modules/worker_service_account"
  count  = var.enable_erm_digits ? 1 : 0

  project_id         = var.project_id
  account_id         = "${var.name_prefix}-erm-worker"
  display_name       = "beam_dp erm_digits worker"
  read_write_buckets = local.read_write_buckets
  read_only_buckets  = local.read_only_buckets
  subscriptions = {
    input = module.erm_digits_pubsub[0].input_subscription_ids["input"]
  }
  # The per-block ledger rows go to a topic of your own when you set ledger_topic.
  publish_topics = merge({
    output      = module.erm_digits_pubsub[0].output_topic_id
    dead_letter = module.erm_digits_pubsub[0].dead_letter_topic_id
  }, var.erm_digits.ledger_topic == null ? {} : { ledger = var.erm_digits.ledger_topic })
  secrets = {
    noise_key = google_secret_manager_secret.erm_digits_noise_key[0].id
  }
  ledger = {
    bucket = module.buckets.ledger_bucket
    prefix = "erm_digits"
  }
  artifact_registry_repository = local.repository
  deployer_member              = var.deployer_member
}

module "erm_digits_job" {
  source = "../../modules/dataflow_flex_job"
  count  = var.enable_erm_digits && var.launch_jobs ? 1 : 0

  project_id              = var.project_id
  region                  = var.region
  name                    = "${var.name_prefix}-erm-digits"
  container_spec_gcs_path = local.erm_digits_template
  sdk_container_image     = local.erm_digits_image
  service_account_email   = module.erm_digits_worker[0].email
  subnetwork              = var.subnetwork
  use_public_ips          = false
  on_delete               = "drain"
  temp_location           = module.buckets.temp_location
  staging_location        = module.buckets.staging_location
  max_workers             = var.max_workers
  labels                  = var.labels

  # ContinualERM is pure epsilon-DP: no delta parameter.
  epsilon = var.erm_digits.epsilon
  parameters = {
    input_subscription = module.erm_digits_pubsub[0].input_subscription_ids["input"]
    output_topic       = module.erm_digits_pubsub[0].output_topic_id
    dead_letter_topic  = module.erm_digits_pubsub[0].dead_letter_topic_id
    ledger_topic       = var.erm_digits.ledger_topic
    end_seconds        = var.erm_digits.end_seconds == null ? null : tostring(var.erm_digits.end_seconds)
    input_avro         = var.erm_digits.input_avro
    output_avro        = var.erm_digits.output_avro
    dead_letter_avro   = var.erm_digits.dead_letter_avro
    noise_key          = "gcpsm:${google_secret_manager_secret.erm_digits_noise_key[0].id}/versions/${var.noise_key_versions.erm_digits}"
    stream_id          = coalesce(var.erm_digits.stream_id, "${var.project_id}/${var.name_prefix}/erm_digits")
    ledger             = "${module.buckets.ledger_url}/erm_digits"
    resume             = var.erm_digits.resume == null ? null : tostring(var.erm_digits.resume)
    lifetime_epsilon   = var.erm_digits.lifetime_epsilon == null ? null : tostring(var.erm_digits.lifetime_epsilon)
    lifetime_delta     = var.erm_digits.lifetime_delta == null ? null : tostring(var.erm_digits.lifetime_delta)
    lifetime_rho       = var.erm_digits.lifetime_rho == null ? null : tostring(var.erm_digits.lifetime_rho)
  }

  depends_on = [module.erm_digits_worker, google_storage_bucket_object.erm_digits_ledger]
}

# ---------------------------------------------------------------------------------------------
# yaml: the generic job (optional): any beam_dp transform from a YAML config
# ---------------------------------------------------------------------------------------------

module "yaml_pubsub" {
  source = "../../modules/pubsub"
  count  = var.enable_yaml_job ? 1 : 0

  project_id  = var.project_id
  name_prefix = "${var.name_prefix}-yaml"
  input_names = ["input"]
  labels      = var.labels
}

resource "google_secret_manager_secret" "yaml_noise_key" {
  count = var.enable_yaml_job ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name_prefix}-yaml-noise-key"
  labels    = var.labels

  replication {
    auto {}
  }
}

resource "google_storage_bucket_object" "yaml_ledger" {
  count = var.enable_yaml_job ? 1 : 0

  bucket       = module.buckets.ledger_bucket
  name         = "yaml/beam_dp_ledger.json"
  content      = jsonencode({ format = "beam_dp.privacy_ledger", version = 1 })
  content_type = "application/json"
}

# The config, uploaded to the templates bucket (which the worker reads) unless yaml.config
# already names a gs:// file.
resource "google_storage_bucket_object" "yaml_config" {
  count = var.enable_yaml_job && var.yaml.config == null ? 1 : 0

  bucket       = module.buckets.bucket_names["templates"]
  name         = "yaml/${basename(var.yaml.config_file)}"
  source       = "${path.module}/${var.yaml.config_file}"
  content_type = "application/yaml"
}

module "yaml_worker" {
  source = "../../modules/worker_service_account"
  count  = var.enable_yaml_job ? 1 : 0

  project_id         = var.project_id
  account_id         = "${var.name_prefix}-yaml-worker"
  display_name       = "beam_dp yaml worker"
  read_write_buckets = local.read_write_buckets
  read_only_buckets  = local.read_only_buckets
  subscriptions = {
    input = module.yaml_pubsub[0].input_subscription_ids["input"]
  }
  publish_topics = {
    output      = module.yaml_pubsub[0].output_topic_id
    dead_letter = module.yaml_pubsub[0].dead_letter_topic_id
  }
  secrets = {
    noise_key = google_secret_manager_secret.yaml_noise_key[0].id
  }
  ledger = {
    bucket = module.buckets.ledger_bucket
    prefix = "yaml"
  }
  artifact_registry_repository = local.repository
  deployer_member              = var.deployer_member
}

module "yaml_job" {
  source = "../../modules/dataflow_flex_job"
  count  = var.enable_yaml_job && var.launch_jobs ? 1 : 0

  project_id              = var.project_id
  region                  = var.region
  name                    = "${var.name_prefix}-yaml"
  container_spec_gcs_path = local.yaml_template
  sdk_container_image     = local.yaml_image
  service_account_email   = module.yaml_worker[0].email
  subnetwork              = var.subnetwork
  use_public_ips          = false
  on_delete               = "drain"
  temp_location           = module.buckets.temp_location
  staging_location        = module.buckets.staging_location
  max_workers             = var.max_workers
  labels                  = var.labels

  epsilon = var.yaml.epsilon
  delta   = var.yaml.delta
  parameters = {
    config = coalesce(var.yaml.config, "gs://${module.buckets.bucket_names["templates"]}/yaml/${basename(var.yaml.config_file)}")
    # The config's Jinja variables: this example's subscription and topics, then yours.
    jinja_variables = jsonencode(merge({
      subscription      = module.yaml_pubsub[0].input_subscription_ids["input"]
      output_topic      = module.yaml_pubsub[0].output_topic_id
      dead_letter_topic = module.yaml_pubsub[0].dead_letter_topic_id
    }, var.yaml.jinja_variables))
    rho              = var.yaml.rho == null ? null : tostring(var.yaml.rho)
    noise_key        = "gcpsm:${google_secret_manager_secret.yaml_noise_key[0].id}/versions/${var.noise_key_versions.yaml}"
    stream_id        = coalesce(var.yaml.stream_id, "${var.project_id}/${var.name_prefix}/yaml")
    ledger           = "${module.buckets.ledger_url}/yaml"
    resume           = var.yaml.resume == null ? null : tostring(var.yaml.resume)
    lifetime_epsilon = var.yaml.lifetime_epsilon == null ? null : tostring(var.yaml.lifetime_epsilon)
    lifetime_delta   = var.yaml.lifetime_delta == null ? null : tostring(var.yaml.lifetime_delta)
    lifetime_rho     = var.yaml.lifetime_rho == null ? null : tostring(var.yaml.lifetime_rho)
  }

  depends_on = [module.yaml_worker, google_storage_bucket_object.yaml_ledger, google_storage_bucket_object.yaml_config]
}

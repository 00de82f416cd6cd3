variable "project_id" {
  type        = string
  description = "Project to deploy into."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid project ID (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "region" {
  type        = string
  description = "Region of the jobs, buckets and image repository, e.g. europe-west1."
  default     = "europe-west1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1 or us-central1."
  }
}

variable "name_prefix" {
  type        = string
  description = "Prefix of topic, subscription, service account and job names."
  default     = "beam-dp"

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{1,10}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 3-12 lowercase letters, digits or hyphens, starting with a letter (service account IDs are at most 30 characters)."
  }
}

variable "bucket_prefix" {
  type        = string
  description = "Globally unique prefix of the bucket names (<prefix>-staging, -temp, -templates). Null uses \"<project_id>-beam-dp\"."
  default     = null

  validation {
    condition     = var.bucket_prefix == null || can(regex("^[a-z0-9][-a-z0-9]{1,50}[a-z0-9]$", var.bucket_prefix))
    error_message = "bucket_prefix must be null or 3-52 lowercase letters, digits or hyphens."
  }
}

variable "subnetwork" {
  type        = string
  description = "Worker subnetwork in var.region (regions/<R>/subnetworks/<S> or its full URL); it must have Private Google Access enabled because workers have no public IP."

  validation {
    condition     = can(regex("^(https://www\\.googleapis\\.com/compute/v1/projects/[^/]+/)?regions/[a-z]+-[a-z]+[0-9]+/subnetworks/[a-z]([-a-z0-9]*[a-z0-9])?$", var.subnetwork))
    error_message = "subnetwork must be regions/<R>/subnetworks/<S> or https://www.googleapis.com/compute/v1/projects/<P>/regions/<R>/subnetworks/<S>."
  }
}

variable "deployer_member" {
  type        = string
  description = "The principal that runs terraform apply (e.g. \"user:alice@example.com\" or \"serviceAccount:terraform@P.iam.gserviceaccount.com\"); it alone gets roles/iam.serviceAccountUser on the worker service accounts so it can launch jobs as them."

  validation {
    condition     = can(regex("^(user|serviceAccount|group|principal|principalSet):.+$", var.deployer_member))
    error_message = "deployer_member must be an IAM member such as user:alice@example.com."
  }
}

variable "image_tag" {
  type        = string
  description = "Tag of the images pushed to the Artifact Registry repository (use the git commit, tags are immutable). The images are <repo>/continual-counts:<tag>, <repo>/pmwg-queries:<tag>, <repo>/boost-queries:<tag> and <repo>/erm-digits:<tag>."
  default     = "latest"

  validation {
    condition     = can(regex("^[a-zA-Z0-9_][-_.a-zA-Z0-9]{0,127}$", var.image_tag))
    error_message = "image_tag must be a valid Docker tag."
  }
}

variable "launch_jobs" {
  type        = bool
  description = "Launch the Dataflow jobs. Leave false for the first apply (infrastructure only), build and push the images and the template specs, then apply again with true."
  default     = false
}

variable "enable_pmwg_queries" {
  type        = bool
  description = "Also deploy the pmwg_queries job (its own topics, subscriptions and worker service account)."
  default     = false
}

variable "enable_boost_queries" {
  type        = bool
  description = "Also deploy the boost_queries job (its own topics, subscriptions and worker service account)."
  default     = false
}

variable "enable_yaml_job" {
  type        = bool
  description = "Also deploy the generic yaml job (pipelines/yaml: any beam_dp transform from a YAML config; its own topics, subscription, noise-key secret, ledger prefix and worker service account)."
  default     = false
}

variable "enable_erm_digits" {
  type        = bool
  description = "Also deploy the erm_digits job (its own topics, subscription and worker service account)."
  default     = false
}

variable "max_workers" {
  type        = number
  description = "Autoscaling upper bound on workers per job."
  default     = 3

  validation {
    condition     = var.max_workers >= 1 && var.max_workers <= 1000 && floor(var.max_workers) == var.max_workers
    error_message = "max_workers must be an integer between 1 and 1000."
  }
}

variable "force_destroy_buckets" {
  type        = bool
  description = "Allow terraform destroy to delete non-empty buckets (throwaway projects only)."
  default     = false
}

variable "labels" {
  type        = map(string)
  description = "Labels applied to every resource that supports them."
  default     = { app = "beam-dp" }
}

variable "continual_counts" {
  type = object({
    epsilon                    = number
    delta                      = optional(number, 0)
    step_seconds               = number
    allowed_lateness_seconds   = optional(number, 0)
    public_keys                = list(string)
    max_contributions_per_step = optional(number, 1)
    max_keys_per_unit          = optional(number, 1)
    max_steps_per_unit         = optional(number, 1)
    horizon_steps              = optional(number)
    mechanism                  = optional(string, "auto")
    estimator                  = optional(string)
    timestamp_attribute        = optional(string)
    input_avro                 = optional(string)
    output_avro                = optional(string)
    dead_letter_avro           = optional(string)
    public_keys_file           = optional(string)
    start                      = optional(string)
    end                        = optional(string)
    num_shards                 = optional(number)
    progress_every             = optional(number)
    stream_id                  = optional(string)
    lateness                   = optional(string, "watermark")
    resume                     = optional(bool)
    lifetime_epsilon           = optional(number)
    lifetime_delta             = optional(number)
    lifetime_rho               = optional(number)
  })
  description = "Template parameters of the continual_counts job (see pipelines/continual_counts/metadata.json). horizon_steps null means an unbounded horizon; timestamp_attribute null means Pub/Sub publish time. input_avro must stay null here (this example reads the Pub/Sub subscription it creates); output_avro/dead_letter_avro (gs:// directories) add Avro sinks; start/end are RFC 3339 or epoch seconds (start defaults to the sample start: set it for real streams); num_shards and progress_every null mean the job's defaults. stream_id (the root of every noise address; keep it across restarts and updates of the job) defaults to <project>/<name_prefix>/continual_counts. lateness is the lateness rule (watermark or arrival; arrival needs timestamp_attribute null). The privacy ledger (docs/privacy_model.md) is the job's prefix of the ledger bucket: lifetime_epsilon/lifetime_delta or lifetime_rho (null: the run's own budget) bound the stream's total over all counted runs; resume = true relaunches as a continuation of the stream's latest run (not counted again), false records a run as counted even under an in-place update, null (default) lets --update decide."

  validation {
    condition     = var.continual_counts.epsilon > 0
    error_message = "continual_counts.epsilon must be positive."
  }
  validation {
    condition     = var.continual_counts.delta >= 0 && var.continual_counts.delta < 1
    error_message = "continual_counts.delta must be in [0, 1)."
  }
  validation {
    condition     = var.continual_counts.step_seconds >= 1 && floor(var.continual_counts.step_seconds) == var.continual_counts.step_seconds
    error_message = "continual_counts.step_seconds must be a positive integer."
  }
  validation {
    condition     = var.continual_counts.allowed_lateness_seconds >= 0 && floor(var.continual_counts.allowed_lateness_seconds) == var.continual_counts.allowed_lateness_seconds
    error_message = "continual_counts.allowed_lateness_seconds must be a non-negative integer."
  }
  validation {
    condition     = length(var.continual_counts.public_keys) > 0 && alltrue([for k in var.continual_counts.public_keys : length(k) > 0 && !strcontains(k, ",")])
    error_message = "continual_counts.public_keys must be a non-empty list of non-empty keys without commas."
  }
  validation {
    condition = alltrue([for n in [
      var.continual_counts.max_contributions_per_step,
      var.continual_counts.max_keys_per_unit,
      var.continual_counts.max_steps_per_unit,
    ] : n >= 1 && floor(n) == n])
    error_message = "continual_counts.max_contributions_per_step, max_keys_per_unit and max_steps_per_unit must be positive integers."
  }
  validation {
    condition     = var.continual_counts.horizon_steps == null || try(var.continual_counts.horizon_steps >= 1 && floor(var.continual_counts.horizon_steps) == var.continual_counts.horizon_steps, false)
    error_message = "continual_counts.horizon_steps must be null (unbounded) or a positive integer."
  }
  validation {
    condition     = contains(["auto", "blt", "balanced_tree", "kary_tree", "binary_tree", "infinite_tree", "unbounded_tree", "per_step"], var.continual_counts.mechanism)
    error_message = "continual_counts.mechanism must be one of auto, blt, balanced_tree, kary_tree, binary_tree, infinite_tree, unbounded_tree, per_step."
  }
  validation {
    condition     = var.continual_counts.estimator == null || contains(["textbook", "variance_reduced"], coalesce(var.continual_counts.estimator, "none"))
    error_message = "continual_counts.estimator must be null, \"textbook\" or \"variance_reduced\"."
  }
  validation {
    condition     = var.continual_counts.timestamp_attribute == null || can(regex("^[a-zA-Z][-_.~+%a-zA-Z0-9]{0,255}$", var.continual_counts.timestamp_attribute))
    error_message = "continual_counts.timestamp_attribute must be null or a Pub/Sub attribute name."
  }
  validation {
    condition     = var.continual_counts.input_avro == null
    error_message = "continual_counts.input_avro must be null: this example reads the Pub/Sub subscription it creates (the job takes at most one input)."
  }
  validation {
    condition = alltrue([for v in [
      var.continual_counts.output_avro,
      var.continual_counts.dead_letter_avro,
      var.continual_counts.public_keys_file,
    ] : v == null || can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/[^\\s]*)?$", v))])
    error_message = "continual_counts.output_avro, dead_letter_avro and public_keys_file must be null or gs:// paths."
  }
  validation {
    condition = alltrue([for v in [var.continual_counts.start, var.continual_counts.end] :
    v == null || can(regex("^([0-9]{1,12}(\\.[0-9]+)?|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|z|[+-][0-9]{2}:[0-9]{2}))$", v))])
    error_message = "continual_counts.start and end must be null, RFC 3339 with a time zone, or epoch seconds."
  }
  validation {
    condition = alltrue([for n in [var.continual_counts.num_shards, var.continual_counts.progress_every] :
    n == null || try(n >= 1 && floor(n) == n, false)])
    error_message = "continual_counts.num_shards and progress_every must be null or positive integers."
  }
  validation {
    condition     = contains(["watermark", "arrival"], var.continual_counts.lateness)
    error_message = "continual_counts.lateness must be \"watermark\" or \"arrival\"."
  }
  validation {
    condition = alltrue([for n in [var.continual_counts.lifetime_epsilon, var.continual_counts.lifetime_rho] :
    n == null || try(n > 0, false)])
    error_message = "continual_counts.lifetime_epsilon and lifetime_rho must be null or positive."
  }
  validation {
    condition     = var.continual_counts.lifetime_delta == null || try(var.continual_counts.lifetime_delta >= 0 && var.continual_counts.lifetime_delta < 1 && var.continual_counts.lifetime_epsilon != null, false)
    error_message = "continual_counts.lifetime_delta must be null, or in [0, 1) with lifetime_epsilon."
  }
  validation {
    condition     = var.continual_counts.lifetime_rho == null || (var.continual_counts.lifetime_epsilon == null && var.continual_counts.lifetime_delta == null)
    error_message = "continual_counts: give either lifetime_rho or lifetime_epsilon/lifetime_delta."
  }
}

variable "pmwg_queries" {
  type = object({
    epsilon          = number
    delta            = number
    alpha            = number
    beta             = number
    domain_size      = number
    window_seconds   = optional(number, 0)
    start            = optional(string)
    step_seconds     = optional(number, 60)
    end              = optional(string)
    output_avro      = optional(string)
    dead_letter_avro = optional(string)
    data_avro        = optional(string)
    query_avro       = optional(string)
    stream_id        = optional(string)
    resume           = optional(bool)
    lifetime_epsilon = optional(number)
    lifetime_delta   = optional(number)
    lifetime_rho     = optional(number)
  })
  description = "Template parameters of the pmwg_queries job (see pipelines/pmwg_queries/metadata.json); used only when enable_pmwg_queries is true. start (required by the job: the public start of its step clock, RFC 3339 or epoch seconds), step_seconds (default 60: answers are released at the end of each step) and end (null: unbounded) are the public step clock; window_seconds 0 means one growing database, > 0 one database per period of that many seconds. data_avro/query_avro must stay null here (this example reads the Pub/Sub subscriptions it creates); output_avro/dead_letter_avro (gs:// directories) add Avro sinks. The privacy ledger (docs/privacy_model.md) is the job's prefix of the ledger bucket: lifetime_epsilon/lifetime_delta or lifetime_rho (null: the run's own budget) bound the stream's total over all counted runs; resume = true relaunches as a continuation of the stream's latest run (not counted again), false records a run as counted even under an in-place update, null (default) lets --update decide."
  default = {
    epsilon        = 1
    delta          = 0.000001
    alpha          = 0.1
    beta           = 0.05
    domain_size    = 1024
    window_seconds = 0
  }

  validation {
    condition     = var.pmwg_queries.epsilon > 0
    error_message = "pmwg_queries.epsilon must be positive."
  }
  validation {
    condition     = var.pmwg_queries.delta >= 0 && var.pmwg_queries.delta < 1
    error_message = "pmwg_queries.delta must be in [0, 1)."
  }
  validation {
    condition     = var.pmwg_queries.alpha > 0
    error_message = "pmwg_queries.alpha must be positive."
  }
  validation {
    condition     = var.pmwg_queries.beta > 0 && var.pmwg_queries.beta < 1
    error_message = "pmwg_queries.beta must be in (0, 1)."
  }
  validation {
    condition     = var.pmwg_queries.domain_size >= 1 && floor(var.pmwg_queries.domain_size) == var.pmwg_queries.domain_size
    error_message = "pmwg_queries.domain_size must be a positive integer."
  }
  validation {
    condition     = var.pmwg_queries.window_seconds >= 0 && floor(var.pmwg_queries.window_seconds) == var.pmwg_queries.window_seconds
    error_message = "pmwg_queries.window_seconds must be a non-negative integer (0 = one growing database)."
  }
  validation {
    condition     = var.pmwg_queries.step_seconds >= 1 && floor(var.pmwg_queries.step_seconds) == var.pmwg_queries.step_seconds
    error_message = "pmwg_queries.step_seconds must be a positive integer."
  }
  validation {
    condition     = var.pmwg_queries.data_avro == null && var.pmwg_queries.query_avro == null
    error_message = "pmwg_queries.data_avro and query_avro must be null: this example reads the Pub/Sub subscriptions it creates."
  }
  validation {
    condition = alltrue([for n in [var.pmwg_queries.lifetime_epsilon, var.pmwg_queries.lifetime_rho] :
    n == null || try(n > 0, false)])
    error_message = "pmwg_queries.lifetime_epsilon and lifetime_rho must be null or positive."
  }
  validation {
    condition     = var.pmwg_queries.lifetime_delta == null || try(var.pmwg_queries.lifetime_delta >= 0 && var.pmwg_queries.lifetime_delta < 1 && var.pmwg_queries.lifetime_epsilon != null, false)
    error_message = "pmwg_queries.lifetime_delta must be null, or in [0, 1) with lifetime_epsilon."
  }
  validation {
    condition     = var.pmwg_queries.lifetime_rho == null || (var.pmwg_queries.lifetime_epsilon == null && var.pmwg_queries.lifetime_delta == null)
    error_message = "pmwg_queries: give either lifetime_rho or lifetime_epsilon/lifetime_delta."
  }
  validation {
    condition = alltrue([for v in [var.pmwg_queries.output_avro, var.pmwg_queries.dead_letter_avro] :
    v == null || can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/[^\\s]*)?$", v))])
    error_message = "pmwg_queries.output_avro and dead_letter_avro must be null or gs:// paths."
  }
}

variable "noise_key_versions" {
  type = object({
    continual_counts = optional(number, 1)
    pmwg_queries     = optional(number, 1)
    boost_queries    = optional(number, 1)
    erm_digits       = optional(number, 1)
    yaml             = optional(number, 1)
  })
  default     = {}
  description = "The Secret Manager version number of each job's noise key (the version you added with gcloud secrets versions add). Pinned: an alias such as latest could resolve to another key on a restarted worker, which would draw other noise at the same addresses. Keep it for the stream's lifetime."

  validation {
    condition     = alltrue([for v in values(var.noise_key_versions) : v >= 1 && floor(v) == v])
    error_message = "noise_key_versions must be positive integers."
  }
}

variable "boost_queries" {
  type = object({
    epsilon                  = number
    delta                    = optional(number, 0)
    alpha                    = optional(number)
    beta                     = optional(number)
    preset                   = optional(string)
    blocks                   = optional(number)
    noise                    = optional(string)
    cache_capacity           = optional(number)
    retention_blocks         = optional(number)
    replay_retention_seconds = optional(number)
    output_avro              = optional(string)
    dead_letter_avro         = optional(string)
    data_avro                = optional(string)
    query_avro               = optional(string)
    stream_id                = optional(string)
    resume                   = optional(bool)
    lifetime_epsilon         = optional(number)
    lifetime_delta           = optional(number)
    lifetime_rho             = optional(number)
  })
  description = "Template parameters of the boost_queries job (see pipelines/boost_queries/metadata.json and docs/boost.md); used only when enable_boost_queries is true. epsilon is every block's privacy-filter capacity epsilon_G; delta must be 0 with noise laplace (default) and positive with noise gaussian. Null optional values leave the job's defaults. cache_capacity, retention_blocks and replay_retention_seconds bound the state of a long-running job (docs/boost.md, Bounded state). data_avro/query_avro must stay null here (this example reads the Pub/Sub subscriptions it creates). Ledger parameters as for pmwg_queries."
  default = {
    epsilon = 10
  }

  validation {
    condition     = var.boost_queries.epsilon > 0
    error_message = "boost_queries.epsilon must be positive."
  }
  validation {
    condition     = var.boost_queries.delta >= 0 && var.boost_queries.delta < 1
    error_message = "boost_queries.delta must be in [0, 1)."
  }
  validation {
    condition     = var.boost_queries.noise == null || contains(["laplace", "gaussian"], coalesce(var.boost_queries.noise, "laplace"))
    error_message = "boost_queries.noise must be laplace or gaussian."
  }
  validation {
    condition     = (coalesce(var.boost_queries.noise, "laplace") == "laplace") == (var.boost_queries.delta == 0)
    error_message = "boost_queries.delta must be 0 with noise laplace and positive with noise gaussian."
  }
  validation {
    condition     = var.boost_queries.alpha == null || try(var.boost_queries.alpha > 0, false)
    error_message = "boost_queries.alpha must be null or positive."
  }
  validation {
    condition     = var.boost_queries.beta == null || try(var.boost_queries.beta > 0 && var.boost_queries.beta < 1, false)
    error_message = "boost_queries.beta must be null or in (0, 1)."
  }
  validation {
    condition     = var.boost_queries.preset == null || contains(["tree_pmw_bypass", "tree_pmw_bypass_warm", "pmw_bypass", "vanilla_pmw", "laplace", "exact_cache", "tree_exact_cache"], coalesce(var.boost_queries.preset, "tree_pmw_bypass"))
    error_message = "boost_queries.preset must be one of the job's presets (pipelines/boost_queries/metadata.json)."
  }
  validation {
    condition = alltrue([for n in [var.boost_queries.blocks, var.boost_queries.retention_blocks, var.boost_queries.replay_retention_seconds] :
    n == null || try(n >= 1 && floor(n) == n, false)])
    error_message = "boost_queries.blocks, retention_blocks and replay_retention_seconds must be null or positive integers."
  }
  validation {
    condition     = var.boost_queries.cache_capacity == null || try(var.boost_queries.cache_capacity >= 2 && floor(var.boost_queries.cache_capacity) == var.boost_queries.cache_capacity, false)
    error_message = "boost_queries.cache_capacity must be null or an integer >= 2."
  }
  validation {
    condition     = var.boost_queries.data_avro == null && var.boost_queries.query_avro == null
    error_message = "boost_queries.data_avro and query_avro must be null: this example reads the Pub/Sub subscriptions it creates."
  }
  validation {
    condition = alltrue([for n in [var.boost_queries.lifetime_epsilon, var.boost_queries.lifetime_rho] :
    n == null || try(n > 0, false)])
    error_message = "boost_queries.lifetime_epsilon and lifetime_rho must be null or positive."
  }
  validation {
    condition     = var.boost_queries.lifetime_delta == null || try(var.boost_queries.lifetime_delta >= 0 && var.boost_queries.lifetime_delta < 1 && var.boost_queries.lifetime_epsilon != null, false)
    error_message = "boost_queries.lifetime_delta must be null, or in [0, 1) with lifetime_epsilon."
  }
  validation {
    condition     = var.boost_queries.lifetime_rho == null || (var.boost_queries.lifetime_epsilon == null && var.boost_queries.lifetime_delta == null)
    error_message = "boost_queries: give either lifetime_rho or lifetime_epsilon/lifetime_delta."
  }
  validation {
    condition = alltrue([for v in [var.boost_queries.output_avro, var.boost_queries.dead_letter_avro] :
    v == null || can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/[^\\s]*)?$", v))])
    error_message = "boost_queries.output_avro and dead_letter_avro must be null or gs:// paths."
  }
}

variable "erm_digits" {
  type = object({
    epsilon          = number
    end_seconds      = optional(number)
    ledger_topic     = optional(string)
    output_avro      = optional(string)
    dead_letter_avro = optional(string)
    input_avro       = optional(string)
    stream_id        = optional(string)
    resume           = optional(bool)
    lifetime_epsilon = optional(number)
    lifetime_delta   = optional(number)
    lifetime_rho     = optional(number)
  })
  description = "Template parameters of the erm_digits job (see pipelines/erm_digits/metadata.json and docs/erm.md); used only when enable_erm_digits is true. epsilon is each transform's pure epsilon per example (the job runs three transforms: 3 epsilon per example in total); there is no delta. end_seconds is the public end of the release period. ledger_topic (projects/P/topics/T, a topic you create) also publishes the per-block ledger rows; the worker gets publish on it only when set. input_avro must stay null here. Ledger parameters as for pmwg_queries."
  default = {
    epsilon = 100
  }

  validation {
    condition     = var.erm_digits.epsilon > 0
    error_message = "erm_digits.epsilon must be positive."
  }
  validation {
    condition     = var.erm_digits.end_seconds == null || try(var.erm_digits.end_seconds >= 1 && floor(var.erm_digits.end_seconds) == var.erm_digits.end_seconds, false)
    error_message = "erm_digits.end_seconds must be null or a positive integer (seconds since the epoch)."
  }
  validation {
    condition     = var.erm_digits.ledger_topic == null || can(regex("^projects/[^/]+/topics/[a-zA-Z][-_.~+%a-zA-Z0-9]{2,254}$", coalesce(var.erm_digits.ledger_topic, "x")))
    error_message = "erm_digits.ledger_topic must be null or projects/<P>/topics/<T>."
  }
  validation {
    condition     = var.erm_digits.input_avro == null
    error_message = "erm_digits.input_avro must be null: this example reads the Pub/Sub subscription it creates."
  }
  validation {
    condition = alltrue([for n in [var.erm_digits.lifetime_epsilon, var.erm_digits.lifetime_rho] :
    n == null || try(n > 0, false)])
    error_message = "erm_digits.lifetime_epsilon and lifetime_rho must be null or positive."
  }
  validation {
    condition     = var.erm_digits.lifetime_delta == null || try(var.erm_digits.lifetime_delta >= 0 && var.erm_digits.lifetime_delta < 1 && var.erm_digits.lifetime_epsilon != null, false)
    error_message = "erm_digits.lifetime_delta must be null, or in [0, 1) with lifetime_epsilon."
  }
  validation {
    condition     = var.erm_digits.lifetime_rho == null || (var.erm_digits.lifetime_epsilon == null && var.erm_digits.lifetime_delta == null)
    error_message = "erm_digits: give either lifetime_rho or lifetime_epsilon/lifetime_delta."
  }
  validation {
    condition = alltrue([for v in [var.erm_digits.output_avro, var.erm_digits.dead_letter_avro] :
    v == null || can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/[^\\s]*)?$", v))])
    error_message = "erm_digits.output_avro and dead_letter_avro must be null or gs:// paths."
  }
}

variable "yaml" {
  type = object({
    epsilon          = number
    delta            = optional(number, 0)
    rho              = optional(number)
    config           = optional(string)
    config_file      = optional(string, "../../../pipelines/yaml/configs/pubsub_counts.yaml")
    jinja_variables  = optional(map(string), {})
    stream_id        = optional(string)
    resume           = optional(bool)
    lifetime_epsilon = optional(number)
    lifetime_delta   = optional(number)
    lifetime_rho     = optional(number)
  })
  description = "Template parameters of the generic yaml job (see pipelines/yaml/metadata.json and docs/deploy.md 5b); used only when enable_yaml_job is true. epsilon (and delta) is the pipeline budget every beam_dp transform of the config is charged to; a config that asks for more is refused at launch. config is a gs:// YAML file of yours; when null, config_file (relative to this directory; default the streaming Pub/Sub example) is uploaded to the templates bucket. jinja_variables are added to the subscription, output_topic and dead_letter_topic this example creates (the example config also needs start and end). Ledger parameters as for pmwg_queries."
  default = {
    epsilon = 1
  }

  validation {
    condition     = var.yaml.epsilon > 0
    error_message = "yaml.epsilon must be positive."
  }
  validation {
    condition     = var.yaml.delta >= 0 && var.yaml.delta < 1
    error_message = "yaml.delta must be in [0, 1)."
  }
  validation {
    condition     = var.yaml.rho == null
    error_message = "yaml.rho: this example passes the (epsilon, delta) budget; use the template directly for a rho budget."
  }
  validation {
    condition     = var.yaml.config == null || can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/[^\\s]*)?$", var.yaml.config))
    error_message = "yaml.config must be null or a gs:// path."
  }
  validation {
    condition = alltrue([for n in [var.yaml.lifetime_epsilon, var.yaml.lifetime_rho] :
    n == null || try(n > 0, false)])
    error_message = "yaml.lifetime_epsilon and lifetime_rho must be null or positive."
  }
  validation {
    condition     = var.yaml.lifetime_delta == null || try(var.yaml.lifetime_delta >= 0 && var.yaml.lifetime_delta < 1 && var.yaml.lifetime_epsilon != null, false)
    error_message = "yaml.lifetime_delta must be null, or in [0, 1) with lifetime_epsilon."
  }
  validation {
    condition     = var.yaml.lifetime_rho == null || (var.yaml.lifetime_epsilon == null && var.yaml.lifetime_delta == null)
    error_message = "yaml: give either lifetime_rho or lifetime_epsilon/lifetime_delta."
  }
}

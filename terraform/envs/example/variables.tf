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
  description = "Tag of the images pushed to the Artifact Registry repository (use the git commit, tags are immutable). The images are <repo>/continual-counts:<tag> and <repo>/pmwg-queries:<tag>."
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
  description = "Template parameters of the pmwg_queries job (see pipelines/pmwg_queries/metadata.json); used only when enable_pmwg_queries is true. window_seconds 0 means one global window; window_seconds > 0 needs start (the public start of the windows, RFC 3339 or epoch seconds). data_avro/query_avro must stay null here (this example reads the Pub/Sub subscriptions it creates); output_avro/dead_letter_avro (gs:// directories) add Avro sinks. The privacy ledger (docs/privacy_model.md) is the job's prefix of the ledger bucket: lifetime_epsilon/lifetime_delta or lifetime_rho (null: the run's own budget) bound the stream's total over all counted runs; resume = true relaunches as a continuation of the stream's latest run (not counted again), false records a run as counted even under an in-place update, null (default) lets --update decide."
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
    error_message = "pmwg_queries.window_seconds must be a non-negative integer (0 = global window)."
  }
  validation {
    condition     = var.pmwg_queries.window_seconds == 0 || var.pmwg_queries.start != null
    error_message = "pmwg_queries.start (the public start of the windows) is required when window_seconds > 0."
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
  })
  default     = {}
  description = "The Secret Manager version number of each job's noise key (the version you added with gcloud secrets versions add). Pinned: an alias such as latest could resolve to another key on a restarted worker, which would draw other noise at the same addresses. Keep it for the stream's lifetime."

  validation {
    condition     = alltrue([for v in values(var.noise_key_versions) : v >= 1 && floor(v) == v])
    error_message = "noise_key_versions must be positive integers."
  }
}

variable "project_id" {
  type        = string
  description = "Project the job runs in."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid project ID (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "region" {
  type        = string
  description = "Dataflow regional endpoint and worker region, e.g. europe-west1."

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1 or us-central1."
  }
}

variable "name" {
  type        = string
  description = "Job name. Changing it launches a new job (and drains the old one)."

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,62}[a-z0-9])?$", var.name))
    error_message = "name must be lowercase letters, digits and hyphens, start with a letter, at most 64 characters."
  }
}

variable "container_spec_gcs_path" {
  type        = string
  description = "gs:// path of the Flex Template spec file written by `gcloud dataflow flex-template build`."

  validation {
    condition     = can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,221}[a-z0-9]/.+\\.json$", var.container_spec_gcs_path))
    error_message = "container_spec_gcs_path must be a gs://<bucket>/<path>.json path."
  }
}

variable "sdk_container_image" {
  type        = string
  description = "SDK worker container image (the same image as the template's launcher), e.g. europe-west1-docker.pkg.dev/P/beam-dp/beam-dp:<git-sha>. Null lets workers install from the staged package instead."
  default     = null

  validation {
    condition     = var.sdk_container_image == null || can(regex("^[a-z0-9.-]+(:[0-9]+)?/[^ ]+(:[-_.a-zA-Z0-9]+|@sha256:[a-f0-9]{64})$", var.sdk_container_image))
    error_message = "sdk_container_image must be a registry image reference with an explicit tag or digest."
  }
}

variable "service_account_email" {
  type        = string
  description = "Worker (and launcher) service account; use the worker_service_account module's email. Never the Compute Engine default service account."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]@[a-z][-a-z0-9]{4,28}[a-z0-9]\\.iam\\.gserviceaccount\\.com$", var.service_account_email))
    error_message = "service_account_email must be a user-managed service account (<id>@<project>.iam.gserviceaccount.com)."
  }
}

variable "subnetwork" {
  type        = string
  description = "Subnetwork of the workers, as a full URL (https://www.googleapis.com/compute/v1/projects/P/regions/R/subnetworks/S) or regions/R/subnetworks/S. It must have Private Google Access enabled, since workers get no public IP."

  validation {
    condition     = can(regex("^(https://www\\.googleapis\\.com/compute/v1/projects/[^/]+/)?regions/[a-z]+-[a-z]+[0-9]+/subnetworks/[a-z]([-a-z0-9]*[a-z0-9])?$", var.subnetwork))
    error_message = "subnetwork must be https://www.googleapis.com/compute/v1/projects/<P>/regions/<R>/subnetworks/<S> or regions/<R>/subnetworks/<S>."
  }
}

variable "use_public_ips" {
  type        = bool
  description = "Give workers public IPs. Keep false: workers reach Google APIs through Private Google Access."
  default     = false
}

variable "on_delete" {
  type        = string
  description = "What terraform destroy (or a replacement) does to the running streaming job: \"drain\" finishes in-flight work, \"cancel\" drops it."
  default     = "drain"

  validation {
    condition     = contains(["drain", "cancel"], var.on_delete)
    error_message = "on_delete must be \"drain\" or \"cancel\"."
  }
}

variable "temp_location" {
  type        = string
  description = "gs:// path for Dataflow temporary files (the buckets module's temp_location)."

  validation {
    condition     = can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,221}[a-z0-9](/.*)?$", var.temp_location))
    error_message = "temp_location must be a gs:// path."
  }
}

variable "staging_location" {
  type        = string
  description = "gs:// path for staged files (the buckets module's staging_location)."

  validation {
    condition     = can(regex("^gs://[a-z0-9][-_.a-z0-9]{1,221}[a-z0-9](/.*)?$", var.staging_location))
    error_message = "staging_location must be a gs:// path."
  }
}

variable "machine_type" {
  type        = string
  description = "Worker machine type."
  default     = "n2-standard-2"

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.machine_type))
    error_message = "machine_type must be a Compute Engine machine type such as n2-standard-2."
  }
}

variable "launcher_machine_type" {
  type        = string
  description = "Machine type of the Flex Template launcher VM (null uses Dataflow's default)."
  default     = null

  validation {
    condition     = var.launcher_machine_type == null || can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.launcher_machine_type))
    error_message = "launcher_machine_type must be null or a Compute Engine machine type."
  }
}

variable "max_workers" {
  type        = number
  description = "Autoscaling upper bound on the number of workers."
  default     = 3

  validation {
    condition     = var.max_workers >= 1 && var.max_workers <= 1000 && floor(var.max_workers) == var.max_workers
    error_message = "max_workers must be an integer between 1 and 1000."
  }
}

variable "num_workers" {
  type        = number
  description = "Initial number of workers."
  default     = 1

  validation {
    condition     = var.num_workers >= 1 && var.num_workers <= 1000 && floor(var.num_workers) == var.num_workers
    error_message = "num_workers must be an integer between 1 and 1000."
  }
}

variable "enable_streaming_engine" {
  type        = bool
  description = "Run the streaming job on Streaming Engine (state and timers held by the service, not on worker disks)."
  default     = true
}

variable "additional_experiments" {
  type        = list(string)
  description = "Extra Dataflow experiments, e.g. [\"enable_stackdriver_agent_metrics\"]."
  default     = []
}

variable "kms_key_name" {
  type        = string
  description = "Optional Cloud KMS key (projects/.../cryptoKeys/...) to encrypt job state and data at rest (CMEK). Null uses Google-managed encryption."
  default     = null

  validation {
    condition     = var.kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.kms_key_name))
    error_message = "kms_key_name must be null or projects/<P>/locations/<L>/keyRings/<R>/cryptoKeys/<K>."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels applied to the job. Put only data-independent facts here (they are visible in the console)."
  default     = {}
}

variable "epsilon" {
  type        = number
  description = "Total privacy budget epsilon of the job for one privacy unit, passed as the `epsilon` template parameter. Must be positive; beam_dp validates it again when it builds the graph."

  validation {
    condition     = var.epsilon > 0
    error_message = "epsilon must be positive."
  }
}

variable "delta" {
  type        = number
  description = "Total privacy budget delta of the job, passed as the `delta` template parameter. Must be in [0, 1); null for a pure-epsilon job whose pipeline has no delta parameter (erm_digits)."
  default     = null

  validation {
    condition     = var.delta == null || try(var.delta >= 0 && var.delta < 1, false)
    error_message = "delta must be in [0, 1)."
  }
}

variable "parameters" {
  type        = map(string)
  description = "The pipeline's other template parameters (the names in its metadata.json besides epsilon and delta), as strings. Null values are omitted, so optional parameters can be left null."

  validation {
    condition     = alltrue([for k in keys(var.parameters) : can(regex("^[a-z][a-z0-9_]*$", k))])
    error_message = "parameters keys must be lower_snake pipeline argument names."
  }

  validation {
    condition     = length(setintersection(keys(var.parameters), ["epsilon", "delta", "service_account_email", "sdk_container_image", "subnetwork", "temp_location", "staging_location", "runner", "project", "region"])) == 0
    error_message = "parameters must not set epsilon/delta (use the typed variables) or Dataflow options managed by this module."
  }
}

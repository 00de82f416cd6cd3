variable "project_id" {
  type        = string
  description = "Project of the service account and of its single project-level binding (roles/dataflow.worker)."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid project ID (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "account_id" {
  type        = string
  description = "Service account ID (the part before @), one per pipeline, e.g. \"beam-dp-counts-worker\"."

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{4,28}[a-z0-9])$", var.account_id))
    error_message = "account_id must be 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "display_name" {
  type        = string
  description = "Human-readable name of the service account."
  default     = "beam_dp Dataflow worker"
}

variable "read_write_buckets" {
  type        = map(string)
  description = "Buckets the workers read and write (Dataflow staging and temp), keyed by a static label (e.g. { staging = \"...\", temp = \"...\" }). Gets roles/storage.objectAdmin on each bucket only."
  default     = {}
}

variable "read_only_buckets" {
  type        = map(string)
  description = "Buckets the job only reads (the Flex Template spec bucket), keyed by a static label. Gets roles/storage.objectViewer on each bucket only."
  default     = {}
}

variable "ledger" {
  type = object({
    bucket = string
    prefix = string
  })
  description = "The job's privacy ledger: gs://<bucket>/<prefix>. Gets roles/storage.objectUser on the objects under that prefix only (an IAM condition), so one job's worker cannot read or rewrite another job's ledger. Null grants nothing."
  default     = null

  validation {
    condition     = var.ledger == null || can(regex("^[a-z0-9][-_a-z0-9]{0,61}[a-z0-9]$", var.ledger.prefix))
    error_message = "ledger.prefix must be one path segment of lowercase letters, digits, '-' or '_' (e.g. the job name)."
  }
}

variable "subscriptions" {
  type        = map(string)
  description = "Subscriptions the job reads, keyed by a static label (e.g. { input = \"projects/.../subscriptions/...\" }). Gets roles/pubsub.subscriber and roles/pubsub.viewer on each subscription only."
  default     = {}

  validation {
    condition     = alltrue([for s in values(var.subscriptions) : can(regex("^(projects/[^/]+/subscriptions/)?[a-zA-Z][-_.~+%a-zA-Z0-9]{2,254}$", s))])
    error_message = "subscriptions values must be subscription names or projects/<P>/subscriptions/<S> IDs."
  }
}

variable "publish_topics" {
  type        = map(string)
  description = "Topics the job publishes to (output and dead-letter), keyed by a static label. Gets roles/pubsub.publisher on each topic only."
  default     = {}

  validation {
    condition     = alltrue([for t in values(var.publish_topics) : can(regex("^(projects/[^/]+/topics/)?[a-zA-Z][-_.~+%a-zA-Z0-9]{2,254}$", t))])
    error_message = "publish_topics values must be topic names or projects/<P>/topics/<T> IDs."
  }
}

variable "secrets" {
  type        = map(string)
  description = "Secret Manager secrets the job reads (its noise key), keyed by a static label (e.g. { noise_key = \"projects/P/secrets/S\" }). Gets roles/secretmanager.secretAccessor on each secret only."
  default     = {}

  validation {
    condition     = alltrue([for s in values(var.secrets) : can(regex("^(projects/[^/]+/secrets/)?[a-zA-Z0-9_-]{1,255}$", s))])
    error_message = "secrets values must be secret IDs or projects/<P>/secrets/<S> names."
  }
}

variable "artifact_registry_repository" {
  type = object({
    project  = string
    location = string
    name     = string
  })
  description = "Docker repository holding the job's image (launcher and SDK worker container). Gets roles/artifactregistry.reader on this repository only. Null grants nothing."
  default     = null
}

variable "deployer_member" {
  type        = string
  description = "The one principal that launches jobs as this service account (e.g. \"serviceAccount:terraform@P.iam.gserviceaccount.com\" or \"user:alice@example.com\"). Gets roles/iam.serviceAccountUser on this service account only. Null grants nothing."
  default     = null

  validation {
    condition     = var.deployer_member == null || can(regex("^(user|serviceAccount|group|principal|principalSet):.+$", var.deployer_member))
    error_message = "deployer_member must be null or an IAM member such as user:alice@example.com or serviceAccount:deployer@P.iam.gserviceaccount.com."
  }
}

variable "project_id" {
  type        = string
  description = "Project that owns the buckets."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid project ID (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "name_prefix" {
  type        = string
  description = "Globally unique prefix of the bucket names; the buckets are <prefix>-staging, <prefix>-temp, <prefix>-templates and <prefix>-ledger."

  validation {
    condition     = can(regex("^[a-z0-9][-a-z0-9]{1,50}[a-z0-9]$", var.name_prefix)) && !can(regex("goog", var.name_prefix))
    error_message = "name_prefix must be 3-52 lowercase letters, digits or hyphens, start and end alphanumeric, and not contain \"goog\"."
  }
}

variable "location" {
  type        = string
  description = "Bucket location; use the Dataflow region (e.g. europe-west1) so that staging and temp I/O stays regional."

  validation {
    condition     = can(regex("^[a-z]+[0-9]*(-[a-z]+[0-9]*)*$", lower(var.location)))
    error_message = "location must be a GCS location such as europe-west1, us-central1, EU or US."
  }
}

variable "temp_retention_days" {
  type        = number
  description = "Objects in the temp bucket are deleted this many days after creation (Dataflow temp files are useless once the job that wrote them has moved on)."
  default     = 7

  validation {
    condition     = var.temp_retention_days >= 1 && floor(var.temp_retention_days) == var.temp_retention_days
    error_message = "temp_retention_days must be a positive integer."
  }
}

variable "noncurrent_version_retention_days" {
  type        = number
  description = "Noncurrent (overwritten or deleted) object versions are deleted this many days after they became noncurrent."
  default     = 30

  validation {
    condition     = var.noncurrent_version_retention_days >= 1 && floor(var.noncurrent_version_retention_days) == var.noncurrent_version_retention_days
    error_message = "noncurrent_version_retention_days must be a positive integer."
  }
}

variable "ledger_noncurrent_version_retention_days" {
  type        = number
  description = "Noncurrent versions of privacy ledger records (a record deleted or overwritten by mistake) are kept this many days, so that a stream's history can be restored."
  default     = 3650

  validation {
    condition     = var.ledger_noncurrent_version_retention_days >= 1 && floor(var.ledger_noncurrent_version_retention_days) == var.ledger_noncurrent_version_retention_days
    error_message = "ledger_noncurrent_version_retention_days must be a positive integer."
  }
}

variable "force_destroy" {
  type        = bool
  description = "Allow terraform destroy to delete non-empty buckets. Keep false outside throwaway projects."
  default     = false
}

variable "access_log_bucket" {
  type        = string
  description = "Optional bucket that receives usage logs of the buckets. Null disables access logging."
  default     = null
}

variable "kms_key_name" {
  type        = string
  description = "Optional Cloud KMS key (projects/.../cryptoKeys/...) used as the buckets' default encryption key (CMEK). Null uses Google-managed encryption."
  default     = null

  validation {
    condition     = var.kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.kms_key_name))
    error_message = "kms_key_name must be null or projects/<P>/locations/<L>/keyRings/<R>/cryptoKeys/<K>."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels applied to every bucket."
  default     = {}
}

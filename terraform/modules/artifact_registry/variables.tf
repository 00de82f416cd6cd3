variable "project_id" {
  type        = string
  description = "Project that owns the repository."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid project ID (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "location" {
  type        = string
  description = "Repository location; use the Dataflow region (e.g. europe-west1) so workers pull the image regionally."

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.location)) || contains(["us", "europe", "asia"], var.location)
    error_message = "location must be a region such as europe-west1 or a multi-region (us, europe, asia)."
  }
}

variable "repository_id" {
  type        = string
  description = "Repository ID, e.g. \"beam-dp\"."
  default     = "beam-dp"

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.repository_id))
    error_message = "repository_id must be lowercase letters, digits and hyphens, start with a letter, at most 63 characters."
  }
}

variable "immutable_tags" {
  type        = bool
  description = "Forbid re-pushing an existing tag, so that a Flex Template spec always points at the image it was built with. Tag images with the git commit."
  default     = true
}

variable "kms_key_name" {
  type        = string
  description = "Optional Cloud KMS key (projects/.../cryptoKeys/...) to encrypt the repository with (CMEK). Null uses Google-managed encryption."
  default     = null

  validation {
    condition     = var.kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.kms_key_name))
    error_message = "kms_key_name must be null or projects/<P>/locations/<L>/keyRings/<R>/cryptoKeys/<K>."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels applied to the repository."
  default     = {}
}

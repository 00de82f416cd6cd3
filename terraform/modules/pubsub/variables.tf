variable "project_id" {
  type        = string
  description = "Project that owns the topics and subscriptions."

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid project ID (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "name_prefix" {
  type        = string
  description = "Prefix of every topic and subscription name, e.g. \"beam-dp-counts\"."

  validation {
    condition     = can(regex("^[a-zA-Z][-_.a-zA-Z0-9]{2,200}$", var.name_prefix))
    error_message = "name_prefix must start with a letter and contain only letters, digits, '-', '_' or '.' (3-201 characters)."
  }
}

variable "input_names" {
  type        = set(string)
  description = "One input topic and one pull subscription is created per name (\"input\" for continual_counts; \"data\" and \"queries\" for pmwg_queries)."
  default     = ["input"]

  validation {
    condition     = length(var.input_names) > 0 && alltrue([for n in var.input_names : can(regex("^[a-z][a-z0-9_]{0,30}$", n))])
    error_message = "input_names must be a non-empty set of lower_snake names of at most 31 characters."
  }
}

variable "topic_message_retention_duration" {
  type        = string
  description = "How long every topic retains published messages, so that subscriptions can seek back (\"<seconds>s\", 600s to 31 days)."
  default     = "604800s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.topic_message_retention_duration)) && try(tonumber(trimsuffix(var.topic_message_retention_duration, "s")) >= 600 && tonumber(trimsuffix(var.topic_message_retention_duration, "s")) <= 2678400, false)
    error_message = "topic_message_retention_duration must be \"<seconds>s\" between 600s and 2678400s (31 days)."
  }
}

variable "subscription_message_retention_duration" {
  type        = string
  description = "How long every subscription retains unacknowledged messages (\"<seconds>s\", 600s to 7 days). Bounds how long a stopped job can be restarted without losing input."
  default     = "604800s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.subscription_message_retention_duration)) && try(tonumber(trimsuffix(var.subscription_message_retention_duration, "s")) >= 600 && tonumber(trimsuffix(var.subscription_message_retention_duration, "s")) <= 604800, false)
    error_message = "subscription_message_retention_duration must be \"<seconds>s\" between 600s and 604800s (7 days)."
  }
}

variable "ack_deadline_seconds" {
  type        = number
  description = "Acknowledgement deadline of the subscriptions, in seconds (Dataflow extends it while it processes a message)."
  default     = 60

  validation {
    condition     = var.ack_deadline_seconds >= 10 && var.ack_deadline_seconds <= 600 && floor(var.ack_deadline_seconds) == var.ack_deadline_seconds
    error_message = "ack_deadline_seconds must be an integer between 10 and 600."
  }
}

variable "max_delivery_attempts" {
  type        = number
  description = "Delivery attempts before Pub/Sub forwards an input message to the dead-letter topic (5-100). Dataflow acknowledges messages itself, so this is a last-resort backstop: keep it high."
  default     = 100

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100 && floor(var.max_delivery_attempts) == var.max_delivery_attempts
    error_message = "max_delivery_attempts must be an integer between 5 and 100."
  }
}

variable "create_output_subscription" {
  type        = bool
  description = "Create a pull subscription on the output topic, for operators to watch releases (gcloud pubsub subscriptions pull)."
  default     = true
}

variable "kms_key_name" {
  type        = string
  description = "Optional Cloud KMS key (projects/.../cryptoKeys/...) to encrypt the topics with (CMEK). Null uses Google-managed encryption."
  default     = null

  validation {
    condition     = var.kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.kms_key_name))
    error_message = "kms_key_name must be null or projects/<P>/locations/<L>/keyRings/<R>/cryptoKeys/<K>."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels applied to every topic and subscription."
  default     = {}
}

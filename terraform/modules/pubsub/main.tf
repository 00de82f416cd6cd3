# Pub/Sub plumbing of one beam_dp streaming job: input topic(s) with a pull subscription each,
# an output topic for the releases, and a dead-letter topic (with a subscription so dead letters
# are kept) that both the pipeline (malformed records) and the input subscriptions' dead letter
# policy publish to.

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  # The Pub/Sub service agent forwards undeliverable messages; it must be able to publish to the
  # dead-letter topic and to acknowledge them on the source subscription.
  # https://cloud.google.com/pubsub/docs/handling-failures#grant_forwarding_permissions
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_pubsub_topic" "input" {
  for_each = var.input_names

  project                    = var.project_id
  name                       = "${var.name_prefix}-${each.key}"
  message_retention_duration = var.topic_message_retention_duration
  kms_key_name               = var.kms_key_name
  labels                     = var.labels
}

resource "google_pubsub_topic" "output" {
  project                    = var.project_id
  name                       = "${var.name_prefix}-output"
  message_retention_duration = var.topic_message_retention_duration
  kms_key_name               = var.kms_key_name
  labels                     = var.labels
}

resource "google_pubsub_topic" "dead_letter" {
  project                    = var.project_id
  name                       = "${var.name_prefix}-dead-letter"
  message_retention_duration = var.topic_message_retention_duration
  kms_key_name               = var.kms_key_name
  labels                     = var.labels
}

resource "google_pubsub_subscription" "input" {
  for_each = var.input_names

  project                    = var.project_id
  name                       = "${var.name_prefix}-${each.key}-sub"
  topic                      = google_pubsub_topic.input[each.key].id
  ack_deadline_seconds       = var.ack_deadline_seconds
  message_retention_duration = var.subscription_message_retention_duration
  retain_acked_messages      = false
  labels                     = var.labels

  # A streaming job's subscription must never expire while the job is idle.
  expiration_policy {
    ttl = ""
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }
}

resource "google_pubsub_subscription" "dead_letter" {
  project                    = var.project_id
  name                       = "${var.name_prefix}-dead-letter-sub"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = var.ack_deadline_seconds
  message_retention_duration = var.subscription_message_retention_duration
  labels                     = var.labels

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_subscription" "output" {
  count = var.create_output_subscription ? 1 : 0

  project                    = var.project_id
  name                       = "${var.name_prefix}-output-sub"
  topic                      = google_pubsub_topic.output.id
  ack_deadline_seconds       = var.ack_deadline_seconds
  message_retention_duration = var.subscription_message_retention_duration
  labels                     = var.labels

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_topic_iam_member" "dead_letter_forwarder" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_forwarder" {
  for_each = var.input_names

  project      = var.project_id
  subscription = google_pubsub_subscription.input[each.key].name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}

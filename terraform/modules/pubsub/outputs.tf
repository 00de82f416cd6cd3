output "input_topic_ids" {
  description = "Input topic IDs (projects/<P>/topics/<T>), keyed by input name."
  value       = { for k, t in google_pubsub_topic.input : k => t.id }
}

output "input_subscription_ids" {
  description = "Input subscription IDs (projects/<P>/subscriptions/<S>), keyed by input name; pass them to the pipeline."
  value       = { for k, s in google_pubsub_subscription.input : k => s.id }
}

output "input_subscription_names" {
  description = "Input subscription short names, keyed by input name (for IAM bindings)."
  value       = { for k, s in google_pubsub_subscription.input : k => s.name }
}

output "output_topic_id" {
  description = "Output topic ID (projects/<P>/topics/<T>) the releases are published to."
  value       = google_pubsub_topic.output.id
}

output "output_topic_name" {
  description = "Output topic short name (for IAM bindings)."
  value       = google_pubsub_topic.output.name
}

output "output_subscription_name" {
  description = "Pull subscription on the output topic for watching releases, or null if not created."
  value       = one(google_pubsub_subscription.output[*].name)
}

output "dead_letter_topic_id" {
  description = "Dead-letter topic ID (projects/<P>/topics/<T>)."
  value       = google_pubsub_topic.dead_letter.id
}

output "dead_letter_topic_name" {
  description = "Dead-letter topic short name (for IAM bindings)."
  value       = google_pubsub_topic.dead_letter.name
}

output "dead_letter_subscription_name" {
  description = "Pull subscription on the dead-letter topic, to inspect rejected records."
  value       = google_pubsub_subscription.dead_letter.name
}

# Least privilege (STYLE.md rule 25): the only project-level role is roles/dataflow.worker; every
# other role is bound on the one resource that needs it. Role lists live here, bindings are
# for_each over (resource label, role) pairs whose keys are static, so plans never depend on
# attributes known only after apply.

locals {
  member = "serviceAccount:${google_service_account.worker.email}"

  project_roles          = ["roles/dataflow.worker"]
  read_write_bucket_role = ["roles/storage.objectAdmin"]
  read_only_bucket_roles = ["roles/storage.objectViewer"]
  # subscriber: pull and ack. viewer: pubsub.subscriptions.get, which Dataflow's Pub/Sub reader
  # calls to read the subscription's configuration (ack deadline, topic) before pulling.
  subscription_roles = ["roles/pubsub.subscriber", "roles/pubsub.viewer"]
  topic_roles        = ["roles/pubsub.publisher"]
  repository_roles   = ["roles/artifactregistry.reader"]
  # Read (access) the noise key's versions; nothing else in Secret Manager.
  secret_roles = ["roles/secretmanager.secretAccessor"]
  # The job's privacy ledger: create, read, list and delete (a racing launch withdraws its own
  # record) objects under the job's prefix only (IAM condition below).
  ledger_roles = ["roles/storage.objectUser"]
  # Only the deployer may act as (launch jobs as) the worker.
  deployer_roles = ["roles/iam.serviceAccountUser"]

  read_write_bucket_bindings = {
    for pair in setproduct(keys(var.read_write_buckets), local.read_write_bucket_role) :
    "${pair[0]}/${pair[1]}" => { bucket = var.read_write_buckets[pair[0]], role = pair[1] }
  }
  read_only_bucket_bindings = {
    for pair in setproduct(keys(var.read_only_buckets), local.read_only_bucket_roles) :
    "${pair[0]}/${pair[1]}" => { bucket = var.read_only_buckets[pair[0]], role = pair[1] }
  }
  subscription_bindings = {
    for pair in setproduct(keys(var.subscriptions), local.subscription_roles) :
    "${pair[0]}/${pair[1]}" => { subscription = var.subscriptions[pair[0]], role = pair[1] }
  }
  topic_bindings = {
    for pair in setproduct(keys(var.publish_topics), local.topic_roles) :
    "${pair[0]}/${pair[1]}" => { topic = var.publish_topics[pair[0]], role = pair[1] }
  }
  secret_bindings = {
    for pair in setproduct(keys(var.secrets), local.secret_roles) :
    "${pair[0]}/${pair[1]}" => { secret = var.secrets[pair[0]], role = pair[1] }
  }
}

resource "google_project_iam_member" "project" {
  for_each = toset(local.project_roles)

  project = var.project_id
  role    = each.value
  member  = local.member
}

resource "google_storage_bucket_iam_member" "read_write" {
  for_each = local.read_write_bucket_bindings

  bucket = each.value.bucket
  role   = each.value.role
  member = local.member
}

# The privacy ledger (docs/privacy_model.md): only this worker, only under its own prefix. Object
# reads and writes match on the object name; listing matches on the requested list prefix.
resource "google_storage_bucket_iam_member" "ledger" {
  for_each = var.ledger == null ? toset([]) : toset(local.ledger_roles)

  bucket = var.ledger.bucket
  role   = each.value
  member = local.member

  condition {
    title       = "privacy-ledger-prefix"
    description = "Only the objects under this job's ledger prefix."
    expression  = "resource.name.startsWith(\"projects/_/buckets/${var.ledger.bucket}/objects/${var.ledger.prefix}/\") || api.getAttribute(\"storage.googleapis.com/objectListPrefix\", \"\").startsWith(\"${var.ledger.prefix}/\")"
  }
}

resource "google_storage_bucket_iam_member" "read_only" {
  for_each = local.read_only_bucket_bindings

  bucket = each.value.bucket
  role   = each.value.role
  member = local.member
}

resource "google_pubsub_subscription_iam_member" "subscription" {
  for_each = local.subscription_bindings

  project      = var.project_id
  subscription = each.value.subscription
  role         = each.value.role
  member       = local.member
}

resource "google_pubsub_topic_iam_member" "topic" {
  for_each = local.topic_bindings

  project = var.project_id
  topic   = each.value.topic
  role    = each.value.role
  member  = local.member
}

# The noise key: only this worker may read it (the secret has no other accessor binding).
resource "google_secret_manager_secret_iam_member" "secret" {
  for_each = local.secret_bindings

  project   = var.project_id
  secret_id = each.value.secret
  role      = each.value.role
  member    = local.member
}

resource "google_artifact_registry_repository_iam_member" "repository" {
  for_each = var.artifact_registry_repository == null ? toset([]) : toset(local.repository_roles)

  project    = var.artifact_registry_repository.project
  location   = var.artifact_registry_repository.location
  repository = var.artifact_registry_repository.name
  role       = each.value
  member     = local.member
}

resource "google_service_account_iam_member" "deployer" {
  for_each = var.deployer_member == null ? toset([]) : toset(local.deployer_roles)

  service_account_id = google_service_account.worker.name
  role               = each.value
  member             = var.deployer_member
}

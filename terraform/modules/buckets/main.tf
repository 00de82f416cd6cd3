# The buckets a Flex Template job needs: staging (SDK and package staging), temp (Dataflow
# temporary files), templates (the Flex Template spec files written by
# `gcloud dataflow flex-template build`) and ledger (the jobs' privacy ledgers, one prefix per
# job: docs/privacy_model.md). All private: uniform bucket-level access, public access
# prevention enforced, versioned.

locals {
  buckets = toset(["staging", "temp", "templates", "ledger"])
}

resource "google_storage_bucket" "this" {
  for_each = local.buckets

  project                     = var.project_id
  name                        = "${var.name_prefix}-${each.key}"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy
  labels                      = var.labels

  versioning {
    enabled = true
  }

  # Versioning keeps overwritten objects; bound how long they are kept.
  lifecycle_rule {
    condition {
      # A deleted or overwritten ledger record stays restorable for much longer.
      days_since_noncurrent_time = each.key == "ledger" ? var.ledger_noncurrent_version_retention_days : var.noncurrent_version_retention_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  # Only the temp bucket expires live objects.
  dynamic "lifecycle_rule" {
    for_each = each.key == "temp" ? [var.temp_retention_days] : []
    content {
      condition {
        age = lifecycle_rule.value
      }
      action {
        type = "Delete"
      }
    }
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  dynamic "logging" {
    for_each = var.access_log_bucket == null ? [] : [var.access_log_bucket]
    content {
      log_bucket        = logging.value
      log_object_prefix = "${var.name_prefix}-${each.key}"
    }
  }
}

terraform {
  # optional() object attributes with defaults need >= 1.3; 1.5 is the oldest release tested.
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.0"
    }
  }
}

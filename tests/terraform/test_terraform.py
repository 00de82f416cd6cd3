"""Wiring tests of terraform/ (parsed with python-hcl2; providers are never downloaded).

They pin the properties reviewers care about and that `terraform validate` cannot see:
every metadata.json parameter reaches a flex job from envs/example, the worker service account is
least-privilege (STYLE.md rule 25), every variable is typed and documented (rule 24), streaming
jobs drain and use private IPs, and the input subscriptions dead-letter correctly.
"""

import functools
import importlib.util
import json
import pathlib
import re

import pytest

hcl2 = pytest.importorskip("hcl2")

REPO = pathlib.Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"
MODULES = TERRAFORM / "modules"
EXAMPLE = TERRAFORM / "envs" / "example"
MODULE_FILES = ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md")
# roles/<service>.admin, roles/<service>.editor, roles/<service>.owner and the basic roles.
# (roles/storage.objectAdmin is object-level, bucket-scoped and allowed.)
PRIVILEGED_ROLE = re.compile(r"^roles/((\w+\.)?(admin|editor|owner)|viewer)$", re.IGNORECASE)


def _unq(value):
    """python-hcl2 >= 5 keeps the quotes of string literals and labels; older versions do not."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _expr(value):
    """Text of an expression without the ${...} wrapper python-hcl2 puts around it."""
    value = _unq(value)
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return value[2:-1]
    return value


@functools.lru_cache(maxsize=None)
def _load(path):
    with open(path) as f:
        return hcl2.load(f)


def _load_dir(directory):
    merged = {}
    for path in sorted(directory.glob("*.tf")):
        for key, blocks in _load(path).items():
            merged.setdefault(key, []).extend(blocks)
    return merged


def _blocks(doc, kind):
    """{label: body} of one-label blocks (variable, output, module)."""
    out = {}
    for block in doc.get(kind, []):
        for label, body in block.items():
            out[_unq(label)] = body
    return out


def _resources(doc, rtype=None):
    """[(type, name, body)] of resource blocks."""
    out = []
    for block in doc.get("resource", []):
        for t, named in block.items():
            for name, body in named.items():
                if rtype is None or _unq(t) == rtype:
                    out.append((_unq(t), _unq(name), body))
    return out


def _locals(doc):
    merged = {}
    for block in doc.get("locals", []):
        merged.update({k: v for k, v in block.items() if k != "__is_block__"})
    return merged


def _string_list(value):
    assert isinstance(value, list), value
    return [_unq(v) for v in value]


def _all_tf_dirs():
    return sorted({p.parent for p in TERRAFORM.rglob("*.tf") if ".terraform" not in p.parts})


def _metadata_names(job):
    metadata = json.loads((REPO / "pipelines" / job / "metadata.json").read_text())
    return {p["name"] for p in metadata["parameters"]}


def _flex_job_calls():
    modules = _blocks(_load_dir(EXAMPLE), "module")
    return {name: body for name, body in modules.items()
            if _unq(body["source"]) == "../../modules/dataflow_flex_job"}


# --- structure ----------------------------------------------------------------------------------


def test_every_tf_file_parses():
    paths = [p for p in TERRAFORM.rglob("*.tf") if ".terraform" not in p.parts]
    assert len(paths) >= 25
    for path in paths:
        _load(path)


@pytest.mark.parametrize("module", ["pubsub", "buckets", "artifact_registry",
                                    "worker_service_account", "dataflow_flex_job"])
def test_module_has_the_five_files(module):
    for name in MODULE_FILES:
        assert (MODULES / module / name).is_file(), f"{module}/{name}"


@pytest.mark.parametrize("directory", _all_tf_dirs(), ids=lambda d: str(d.relative_to(TERRAFORM)))
def test_google_provider_is_pinned_to_6(directory):
    versions = _load(directory / "versions.tf")
    (terraform,) = versions["terraform"]
    assert _unq(terraform["required_version"]).startswith(">=")
    (providers,) = terraform["required_providers"]
    assert set(providers) - {"__is_block__"} == {"google"}
    assert _unq(providers["google"]["source"]) == "hashicorp/google"
    assert _unq(providers["google"]["version"]) == "~> 6.0"


@pytest.mark.parametrize("directory", _all_tf_dirs(), ids=lambda d: str(d.relative_to(TERRAFORM)))
def test_every_variable_has_type_and_description(directory):
    variables = _blocks(_load_dir(directory), "variable")
    assert variables
    for name, body in variables.items():
        assert "type" in body, f"{directory.name}: variable {name} has no type"
        assert _unq(body.get("description", "")).strip(), f"{directory.name}: {name} undocumented"


@pytest.mark.parametrize("directory", _all_tf_dirs(), ids=lambda d: str(d.relative_to(TERRAFORM)))
def test_every_output_has_description(directory):
    for name, body in _blocks(_load_dir(directory), "output").items():
        assert _unq(body.get("description", "")).strip(), f"{directory.name}: output {name}"


def test_numeric_and_enum_variables_are_validated():
    for directory in _all_tf_dirs():
        for name, body in _blocks(_load_dir(directory), "variable").items():
            vtype = _expr(body["type"])
            if vtype == "number" or name in {"on_delete", "region", "project_id", "epsilon",
                                              "delta", "subnetwork"}:
                assert body.get("validation"), f"{directory.name}: variable {name} unvalidated"


def test_dp_budget_validation_conditions():
    variables = _blocks(_load_dir(MODULES / "dataflow_flex_job"), "variable")
    eps = _expr(variables["epsilon"]["validation"][0]["condition"])
    delta = _expr(variables["delta"]["validation"][0]["condition"])
    assert eps.replace(" ", "") == "var.epsilon>0"
    assert delta.replace(" ", "") == "var.delta==null||try(var.delta>=0&&var.delta<1,false)"
    example = _blocks(_load_dir(EXAMPLE), "variable")
    for job in JOBS:
        conditions = [_expr(v["condition"]).replace(" ", "") for v in example[job]["validation"]]
        assert f"var.{job}.epsilon>0" in conditions
        if job != "erm_digits":  # pure ε: no delta parameter
            assert f"var.{job}.delta>=0&&var.{job}.delta<1" in conditions


def test_safe_defaults():
    flex = _blocks(_load_dir(MODULES / "dataflow_flex_job"), "variable")
    assert flex["use_public_ips"]["default"] is False
    assert _unq(flex["on_delete"]["default"]) == "drain"
    assert flex["enable_streaming_engine"]["default"] is True
    buckets = _blocks(_load_dir(MODULES / "buckets"), "variable")
    assert buckets["force_destroy"]["default"] is False
    example = _blocks(_load_dir(EXAMPLE), "variable")
    assert example["launch_jobs"]["default"] is False


# --- metadata parameters reach the jobs ---------------------------------------------------------


#: Every job in pipelines/ with a Flex Template; each is deployed by envs/example.
JOBS = ["continual_counts", "pmwg_queries", "boost_queries", "erm_digits", "yaml"]


def _dp_parameter_names(call):
    """Parameters the flex job module adds itself from its typed epsilon/delta variables: epsilon
    always, delta when the job's call sets it (a null delta is omitted: pure-ε jobs)."""
    doc = _load_dir(MODULES / "dataflow_flex_job")
    dp = _expr(_locals(doc)["dp_parameters"]).replace(" ", "")
    assert dp == "{fork,vin{epsilon=var.epsilon,delta=var.delta}:k=>tostring(v)ifv!=null}", dp
    (_, _, job) = _resources(doc, "google_dataflow_flex_template_job")[0]
    assert _expr(job["parameters"]) == "local.job_parameters"
    merged = _expr(_locals(doc)["job_parameters"]).replace(" ", "").replace("\n", "")
    # The DP budget is merged last, so the free-form map cannot override it.
    assert merged.endswith("local.dp_parameters,)") or merged.endswith("local.dp_parameters)")
    return {"epsilon"} | ({"delta"} if "delta" in call else set())


@pytest.mark.parametrize("job", JOBS)
def test_every_metadata_parameter_reaches_the_flex_job(job):
    calls = _flex_job_calls()
    body = calls[f"{job}_job"]
    assert _unq(body["container_spec_gcs_path"]) == f"${{local.{job}_template}}"
    passed = set(body["parameters"]) | _dp_parameter_names(body)
    expected = _metadata_names(job)
    assert passed == expected, (
        f"missing: {sorted(expected - passed)}, unknown: {sorted(passed - expected)}")
    for name in ("epsilon", "delta"):
        if name in body:
            assert _expr(body[name]) == f"var.{job}.{name}"
    for name, value in body["parameters"].items():
        text = _expr(value)
        # Every value comes from a validated variable or a created resource, never a literal.
        assert re.search(r"\b(var|module|google_secret_manager_secret)\.", text), \
            f"{job}.{name} = {text}"
        if name == "ledger":
            # The job's own prefix of the ledger bucket (test_ledger_is_the_jobs_prefix_...).
            assert text == f"${{module.buckets.ledger_url}}/{job}", text
        elif not name.endswith(("subscription", "topic", "noise_key")):
            assert f"var.{job}.{name}" in text, f"{job}.{name} = {text}"


@pytest.mark.parametrize("job", JOBS)
def test_noise_key_is_a_secret_only_the_jobs_worker_reads(job):
    """The job gets a Secret Manager *reference* to its own secret; that secret's only accessor
    binding is the job's worker (through the module's secrets map); Terraform never holds the
    key itself (no secret version resource anywhere)."""
    doc = _load_dir(EXAMPLE)
    secrets = {name: body for _, name, body in
               _resources(doc, "google_secret_manager_secret")}
    secret = f"{job}_noise_key"
    assert secret in secrets
    ref = _expr(_flex_job_calls()[f"{job}_job"]["parameters"]["noise_key"])
    assert ref.startswith("gcpsm:${google_secret_manager_secret." + secret), ref
    # A pinned version: an alias ("latest") could resolve to another key on a restarted worker.
    assert ref.endswith(f"/versions/${{var.noise_key_versions.{job}}}"), ref
    workers = {name: body for name, body in _blocks(doc, "module").items()
               if _unq(body["source"]) == "../../modules/worker_service_account"}
    readers = [name for name, body in workers.items()
               if any(f"google_secret_manager_secret.{secret}" in _expr(v)
                      for v in (body.get("secrets") or {}).values())]
    assert readers == [f"{job}_worker"], readers
    for directory in _all_tf_dirs():
        tf = _load_dir(directory)
        assert not _resources(tf, "google_secret_manager_secret_version"), directory
        for rtype, name, _ in _resources(tf):
            if rtype.startswith("google_secret_manager_secret_iam"):
                assert directory == MODULES / "worker_service_account", (directory, name)
    module_roles = _string_list(_locals(_load_dir(MODULES / "worker_service_account"))[
        "secret_roles"])
    assert module_roles == ["roles/secretmanager.secretAccessor"]


@pytest.mark.parametrize("job", JOBS)
def test_ledger_is_the_jobs_prefix_that_only_its_worker_can_use(job):
    """The privacy ledger: a bucket of the buckets module, one marked prefix per job, and the
    only grant on it is the job's own worker, conditioned on that prefix."""
    doc = _load_dir(EXAMPLE)
    buckets = _load_dir(MODULES / "buckets")
    assert '"ledger"' in _expr(_locals(buckets)["buckets"])
    markers = {name: body for _, name, body in _resources(doc, "google_storage_bucket_object")}
    marker = markers[f"{job}_ledger"]
    assert _expr(marker["bucket"]) == "module.buckets.ledger_bucket"
    assert _unq(marker["name"]) == f"{job}/beam_dp_ledger.json"
    from beam_dp.accounting import ledger as pure_ledger
    assert pure_ledger.LEDGER_MARKER == "beam_dp_ledger.json"
    content = _expr(marker["content"]).replace(" ", "")
    assert 'format="beam_dp.privacy_ledger"' in content and "version=1" in content
    workers = {name: body for name, body in _blocks(doc, "module").items()
               if _unq(body["source"]) == "../../modules/worker_service_account"}
    users = [name for name, body in workers.items() if body.get("ledger")]
    assert sorted(users) == sorted(f"{j}_worker" for j in JOBS)
    ledger = workers[f"{job}_worker"]["ledger"]
    assert _expr(ledger["bucket"]) == "module.buckets.ledger_bucket"
    assert _unq(ledger["prefix"]) == job
    # No other IAM on any bucket outside the worker module.
    for directory in _all_tf_dirs():
        for rtype, name, _ in _resources(_load_dir(directory)):
            if rtype.startswith("google_storage_bucket_iam"):
                assert directory == MODULES / "worker_service_account", (directory, name)
    worker = _worker_doc()
    bindings = {name: body for _, name, body in
                _resources(worker, "google_storage_bucket_iam_member")}
    binding = bindings["ledger"]
    assert _string_list(_locals(worker)["ledger_roles"]) == ["roles/storage.objectUser"]
    assert _expr(binding["member"]) == "local.member"
    (condition,) = binding["condition"]
    expression = _unq(condition["expression"]).replace('\\"', '"')
    assert "objects/${var.ledger.prefix}/" in expression
    assert 'storage.googleapis.com/objectListPrefix' in expression
    assert "${var.ledger.prefix}/" in expression.split("objectListPrefix")[1]


def test_template_locals_point_at_the_right_pipeline():
    example_locals = _locals(_load_dir(EXAMPLE))
    for job in JOBS:
        assert _unq(example_locals[f"{job}_template"]).endswith(f"/templates/{job}.json")


# --- flex job -----------------------------------------------------------------------------------


def test_flex_job_drains_and_uses_private_ips():
    doc = _load_dir(MODULES / "dataflow_flex_job")
    ((_, _, job),) = _resources(doc, "google_dataflow_flex_template_job")
    assert _expr(job["on_delete"]) == "var.on_delete"
    ip = _expr(job["ip_configuration"]).replace(" ", "")
    assert ip == 'var.use_public_ips?"WORKER_IP_PUBLIC":"WORKER_IP_PRIVATE"'
    for name in ("subnetwork", "service_account_email", "sdk_container_image", "temp_location",
                 "staging_location", "enable_streaming_engine"):
        assert _expr(job[name]) == f"var.{name}", name
    for call in _flex_job_calls().values():
        assert _unq(call["on_delete"]) == "drain"
        assert call["use_public_ips"] is False
        assert _expr(call["subnetwork"]) == "var.subnetwork"
        assert re.fullmatch(r"module\.\w+_worker(\[0\])?\.email", _expr(call["service_account_email"]))


def test_job_metadata_declares_streaming():
    for job in JOBS:
        metadata = json.loads((REPO / "pipelines" / job / "metadata.json").read_text())
        assert metadata["streaming"] is True


# --- least privilege ----------------------------------------------------------------------------


def _worker_doc():
    return _load_dir(MODULES / "worker_service_account")


def _role_local(doc, resource_type):
    """Names of the role-list locals a binding resource iterates over."""
    lcls = _locals(doc)
    out = []
    for _, _, body in _resources(doc, resource_type):
        for_each = _expr(body["for_each"])
        for name in re.findall(r"local\.(\w+)", for_each):
            value = lcls[name]
            if isinstance(value, str):  # a bindings map built from a role list
                out += re.findall(r"local\.(\w+_roles?)\b", value)
            else:
                out.append(name)
    return out


def test_worker_roles_are_locals_bound_with_for_each():
    doc = _worker_doc()
    lcls = _locals(doc)
    for _, _, body in _resources(doc):
        if _unq(body.get("role", "")).startswith("roles/"):
            pytest.fail("roles must come from the role lists in locals, not literals")
        if "role" in body:
            assert "for_each" in body
    assert _string_list(lcls["project_roles"]) == ["roles/dataflow.worker"]


def test_only_project_level_role_is_dataflow_worker():
    for directory in _all_tf_dirs():
        doc = _load_dir(directory)
        for rtype in ("google_project_iam_member", "google_project_iam_binding",
                      "google_project_iam_policy"):
            for _, _, body in _resources(doc, rtype):
                assert directory.name == "worker_service_account", (directory, rtype)
                assert _expr(body["for_each"]) == "toset(local.project_roles)"
    assert _role_local(_worker_doc(), "google_project_iam_member") == ["project_roles"]


def test_resource_scoped_roles():
    doc = _worker_doc()
    lcls = _locals(doc)
    expected = {
        "google_storage_bucket_iam_member": {"roles/storage.objectAdmin", "roles/storage.objectViewer",
                                             "roles/storage.objectUser"},
        "google_pubsub_subscription_iam_member": {"roles/pubsub.subscriber", "roles/pubsub.viewer"},
        "google_pubsub_topic_iam_member": {"roles/pubsub.publisher"},
        "google_artifact_registry_repository_iam_member": {"roles/artifactregistry.reader"},
        "google_service_account_iam_member": {"roles/iam.serviceAccountUser"},
    }
    for rtype, roles in expected.items():
        found = set()
        for name in _role_local(doc, rtype):
            found |= set(_string_list(lcls[name]))
        assert found == roles, rtype
    # objectAdmin only on the read-write (staging, temp) buckets.
    assert _string_list(lcls["read_write_bucket_role"]) == ["roles/storage.objectAdmin"]
    # Only the deployer may act as the worker.
    ((_, _, deployer),) = _resources(doc, "google_service_account_iam_member")
    assert _expr(deployer["member"]) == "var.deployer_member"


def test_no_privileged_roles_anywhere():
    for directory in _all_tf_dirs():
        for path in directory.glob("*.tf"):
            for role in re.findall(r'"(roles/[\w.]+)"', path.read_text()):
                assert not PRIVILEGED_ROLE.fullmatch(role), f"{path}: {role}"
    for role in ("roles/editor", "roles/owner", "roles/pubsub.admin", "roles/dataflow.admin",
                 "roles/storage.admin", "roles/pubsub.editor"):
        assert PRIVILEGED_ROLE.fullmatch(role)
    assert not PRIVILEGED_ROLE.fullmatch("roles/storage.objectAdmin")


def test_example_grants_each_worker_only_its_own_resources():
    modules = _blocks(_load_dir(EXAMPLE), "module")
    counts = modules["continual_counts_worker"]
    assert set(counts["subscriptions"]) == {"input"}
    assert set(counts["publish_topics"]) == {"output", "dead_letter"}
    assert "continual_counts_pubsub" in _expr(counts["subscriptions"]["input"])
    pmwg = modules["pmwg_queries_worker"]
    assert set(pmwg["subscriptions"]) == {"data", "queries"}
    for value in pmwg["subscriptions"].values():
        assert "pmwg_queries_pubsub" in _expr(value)
    boost = modules["boost_queries_worker"]
    assert set(boost["subscriptions"]) == {"data", "queries"}
    for value in boost["subscriptions"].values():
        assert "boost_queries_pubsub" in _expr(value)
    erm = modules["erm_digits_worker"]
    assert set(erm["subscriptions"]) == {"input"}
    assert "erm_digits_pubsub" in _expr(erm["subscriptions"]["input"])
    # The optional ledger-rows topic is the user's; publish is granted on it only when set.
    assert "var.erm_digits.ledger_topic" in _expr(erm["publish_topics"])
    lcls = _locals(_load_dir(EXAMPLE))
    assert set(lcls["read_write_buckets"]) == {"staging", "temp"}
    assert set(lcls["read_only_buckets"]) == {"templates"}


# --- Pub/Sub dead-letter wiring -----------------------------------------------------------------


def test_input_subscription_dead_letter_policy():
    doc = _load_dir(MODULES / "pubsub")
    subs = {name: body for _, name, body in _resources(doc, "google_pubsub_subscription")}
    assert set(subs) == {"input", "dead_letter", "output"}
    (policy,) = subs["input"]["dead_letter_policy"]
    assert _expr(policy["dead_letter_topic"]) == "google_pubsub_topic.dead_letter.id"
    assert _expr(policy["max_delivery_attempts"]) == "var.max_delivery_attempts"
    # The dead-letter topic has a subscription, or dead letters would be dropped.
    assert _expr(subs["dead_letter"]["topic"]) == "google_pubsub_topic.dead_letter.id"
    # Subscriptions of a streaming job never expire.
    for body in subs.values():
        (expiration,) = body["expiration_policy"]
        assert _unq(expiration["ttl"]) == ""
        assert _expr(body["message_retention_duration"]).startswith("var.")
    for _, _, body in _resources(doc, "google_pubsub_topic"):
        assert _expr(body["message_retention_duration"]) == "var.topic_message_retention_duration"
    # The Pub/Sub service agent can forward to the dead-letter topic and ack on the source.
    members = {(t, _expr(b.get("topic", b.get("subscription", "")))): _expr(b["member"])
               for t, _, b in _resources(doc) if t.endswith("_iam_member")}
    assert members[("google_pubsub_topic_iam_member", "google_pubsub_topic.dead_letter.name")] \
        == "local.pubsub_service_agent"
    assert members[("google_pubsub_subscription_iam_member",
                    "google_pubsub_subscription.input[each.key].name")] == "local.pubsub_service_agent"
    agent = _unq(_locals(doc)["pubsub_service_agent"])
    assert agent.endswith("@gcp-sa-pubsub.iam.gserviceaccount.com")
    variables = _blocks(doc, "variable")
    assert variables["max_delivery_attempts"]["default"] == 100


# --- buckets and repository ---------------------------------------------------------------------


def test_buckets_are_private_versioned_and_temp_expires():
    doc = _load_dir(MODULES / "buckets")
    ((_, _, bucket),) = _resources(doc, "google_storage_bucket")
    assert bucket["uniform_bucket_level_access"] is True
    assert _unq(bucket["public_access_prevention"]) == "enforced"
    assert bucket["versioning"][0]["enabled"] is True
    (dynamic,) = [d for d in bucket["dynamic"] if "lifecycle_rule" in {_unq(k) for k in d}]
    body = next(iter(dynamic.values()))
    assert '"temp"' in _expr(body["for_each"])
    assert bucket["lifecycle_rule"], "noncurrent versions must expire"


def test_artifact_registry_is_docker():
    doc = _load_dir(MODULES / "artifact_registry")
    ((_, _, repo),) = _resources(doc, "google_artifact_registry_repository")
    assert _unq(repo["format"]) == "DOCKER"


# --- docs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", _all_tf_dirs(), ids=lambda d: str(d.relative_to(TERRAFORM)))
def test_readme_documents_every_variable_and_output(directory):
    readme = (directory / "README.md").read_text()
    doc = _load_dir(directory)
    for kind in ("variable", "output"):
        for name in _blocks(doc, kind):
            assert f"`{name}`" in readme or f"| {name} |" in readme, f"{directory.name}: {name}"


@pytest.mark.parametrize("directory", _all_tf_dirs(), ids=lambda d: str(d.relative_to(TERRAFORM)))
def test_readme_tables_are_up_to_date(directory):
    """Regenerate with: python terraform/gen_readme.py"""
    spec = importlib.util.spec_from_file_location("gen_readme", TERRAFORM / "gen_readme.py")
    gen_readme = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_readme)
    assert gen_readme.tables(directory) in (directory / "README.md").read_text()

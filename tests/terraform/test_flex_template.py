"""Static tests of the Flex Template artefacts: pipelines/Dockerfile, requirements.txt, metadata.json.

Docker is not available where these run, so the image is checked by parsing the Dockerfile: pinned
base images, the launcher binary copied from the launcher base, the package installed from the
source tree, `pip check`, the Flex Template environment, and the Beam SDK image tag equal to the
apache-beam pin in pipelines/requirements.txt. The metadata.json regexes are the first of the two
validations of every DP parameter (the params dataclasses are the second), so they are tested
against tables of good and bad values.
"""

import importlib
import json
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PIPELINES = REPO / "pipelines"
DOCKERFILE = PIPELINES / "Dockerfile"
REQUIREMENTS = PIPELINES / "requirements.txt"

# The pipeline arguments each launcher accepts that a Dataflow user may set (local-only arguments
# such as --plot and the hidden --testing_seed are not template parameters).
EXPECTED_PARAMETERS = {
    "continual_counts": {
        "input_subscription", "output_topic", "dead_letter_topic", "epsilon", "delta",
        "step_seconds", "allowed_lateness_seconds", "public_keys", "max_contributions_per_step",
        "max_keys_per_unit", "max_steps_per_unit", "horizon_steps", "mechanism", "estimator",
        "timestamp_attribute", "input_avro", "output_avro", "dead_letter_avro", "public_keys_file",
        "start", "end", "num_shards", "progress_every", "noise_key", "stream_id", "lateness",
    },
    "pmwg_queries": {
        "data_subscription", "query_subscription", "output_topic", "dead_letter_topic", "epsilon",
        "delta", "alpha", "beta", "domain_size", "window_seconds", "start", "step_seconds", "end",
        "data_avro",
        "query_avro", "output_avro", "dead_letter_avro", "noise_key", "stream_id",
    },
    "erm_digits": {
        "input_subscription", "output_topic", "ledger_topic", "dead_letter_topic", "epsilon",
        "end_seconds", "input_avro", "output_avro", "dead_letter_avro",
    },
    "boost_queries": {
        "data_subscription", "query_subscription", "output_topic", "dead_letter_topic", "epsilon",
        "alpha", "beta", "preset", "blocks", "data_avro", "query_avro", "output_avro",
        "dead_letter_avro", "noise_key", "stream_id", "noise", "delta", "cache_capacity",
        "retention_blocks", "replay_retention_seconds",
    },
    "yaml": {"config", "jinja_variables", "epsilon", "delta", "rho", "noise_key", "stream_id"},
}
# The privacy ledger's parameters (every job; pipelines/common/ledger.py), all optional.
LEDGER_PARAMETERS = {"ledger", "resume", "lifetime_epsilon", "lifetime_delta", "lifetime_rho"}
for _job in EXPECTED_PARAMETERS:
    EXPECTED_PARAMETERS[_job] |= LEDGER_PARAMETERS
EXPECTED_PARAMETERS["erm_digits"] |= {"noise_key", "stream_id"}
OPTIONAL_PARAMETERS = {
    "continual_counts": {"allowed_lateness_seconds", "horizon_steps", "mechanism", "estimator",
                         "timestamp_attribute", "input_subscription", "output_topic",
                         "dead_letter_topic", "public_keys", "input_avro", "output_avro",
                         "dead_letter_avro", "public_keys_file", "start", "end", "num_shards",
                         "progress_every", "noise_key", "stream_id", "lateness"},
    "pmwg_queries": {"window_seconds", "start", "step_seconds", "end", "data_subscription",
                     "query_subscription",
                     "output_topic",
                     "dead_letter_topic", "data_avro", "query_avro", "output_avro",
                     "dead_letter_avro", "noise_key", "stream_id"},
    "erm_digits": {"input_subscription", "output_topic", "ledger_topic", "dead_letter_topic",
                   "end_seconds", "input_avro", "output_avro", "dead_letter_avro"},
    "boost_queries": {"data_subscription", "query_subscription", "output_topic",
                      "dead_letter_topic", "alpha", "beta", "preset", "blocks", "data_avro",
                      "query_avro", "output_avro", "dead_letter_avro", "noise_key", "stream_id",
                      "noise", "delta", "cache_capacity", "retention_blocks",
                      "replay_retention_seconds"},
    "yaml": {"jinja_variables", "epsilon", "delta", "rho", "noise_key", "stream_id"},
}
for _job in OPTIONAL_PARAMETERS:
    OPTIONAL_PARAMETERS[_job] |= LEDGER_PARAMETERS
OPTIONAL_PARAMETERS["erm_digits"] |= {"noise_key", "stream_id"}


def _instructions(path):
    """Dockerfile instructions as (KEYWORD, argument) with continuation lines joined."""
    text = path.read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arg = line.partition(" ")
        out.append((keyword.upper(), arg.strip()))
    return out


def _requirements():
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([A-Za-z0-9_.+-]+)", line)
        assert m, f"requirements.txt: {line!r} is not pinned with =="
        pins[m.group(1).lower()] = m.group(3)
    return pins


def _metadata(job):
    return json.loads((PIPELINES / job / "metadata.json").read_text())


def _regex(job, name):
    (param,) = [p for p in _metadata(job)["parameters"] if p["name"] == name]
    (regex,) = param["regexes"]
    return re.compile(regex)


# --- Dockerfile ---------------------------------------------------------------------------------


def test_dockerfile_from_lines_are_pinned():
    froms = [arg for kw, arg in _instructions(DOCKERFILE) if kw == "FROM"]
    assert len(froms) == 2
    for arg in froms:
        image = arg.split()[0]
        assert "$" not in image, f"FROM {image}: pin the image literally"
        assert re.search(r"(:[\w][\w.-]*|@sha256:[0-9a-f]{64})$", image.split("/")[-1]), image
        assert not image.endswith(":latest"), image
    assert froms[0].startswith("gcr.io/dataflow-templates-base/python311-template-launcher-base")
    assert froms[0].split()[-1] == "template_launcher"
    assert froms[-1].startswith("apache/beam_python3.11_sdk:")


def test_dockerfile_beam_version_matches_requirements():
    froms = [arg for kw, arg in _instructions(DOCKERFILE) if kw == "FROM"]
    sdk_tag = froms[-1].split()[0].rsplit(":", 1)[1]
    pins = _requirements()
    assert pins["apache-beam"] == sdk_tag


def test_requirements_pin_beam_numpy_fastavro():
    pins = _requirements()
    assert set(pins) >= {"apache-beam", "numpy", "fastavro"}
    assert "apache-beam[gcp]==" in REQUIREMENTS.read_text()


def test_dockerfile_copies_launcher_and_installs_package_with_pip_check():
    instructions = _instructions(DOCKERFILE)
    copies = [arg for kw, arg in instructions if kw == "COPY"]
    assert any(c.startswith("--from=template_launcher")
               and "/opt/google/dataflow/python_template_launcher" in c for c in copies)
    assert any(c.split()[0] == "setup.py" for c in copies), "setup.py must be copied"
    assert any(c.startswith("beam_dp/") for c in copies)
    assert any(c.startswith("pipelines/ ") for c in copies)
    runs = " && ".join(arg for kw, arg in instructions if kw == "RUN")
    # The package with its gcp extra (and yaml, for the YAML job's provider).
    assert re.search(r"pip install --no-cache-dir [^&]*\"?\.\[gcp(,[a-z]+)*\]\"?", runs)
    assert "pip install --no-cache-dir -r pipelines/requirements.txt" in runs
    # pip check runs after the last install.
    assert runs.rfind("pip check") > runs.rfind("pip install")


def test_dockerfile_flex_template_environment():
    instructions = _instructions(DOCKERFILE)
    args = dict(arg.split("=", 1) for kw, arg in instructions if kw == "ARG" and "=" in arg)
    assert args["JOB"] == "continual_counts"
    env = dict(arg.split("=", 1) for kw, arg in instructions if kw == "ENV")
    py_file = env["FLEX_TEMPLATE_PYTHON_PY_FILE"].strip('"')
    setup_file = env["FLEX_TEMPLATE_PYTHON_SETUP_FILE"].strip('"')
    resolved = py_file.replace("${WORKDIR}", args["WORKDIR"]).replace("${JOB}", args["JOB"])
    assert resolved == f"{args['WORKDIR']}/pipelines/continual_counts/main.py"
    assert "${JOB}" in py_file, "the entrypoint must follow the JOB build arg"
    assert setup_file.replace("${WORKDIR}", args["WORKDIR"]) == f"{args['WORKDIR']}/setup.py"
    for job in EXPECTED_PARAMETERS:
        assert (PIPELINES / job / "main.py").is_file(), job    # FLEX_TEMPLATE_PYTHON_PY_FILE
    entrypoint = [arg for kw, arg in instructions if kw == "ENTRYPOINT"]
    assert entrypoint == ['["/opt/apache/beam/boot"]']


# --- metadata.json ------------------------------------------------------------------------------


@pytest.mark.parametrize("job", sorted(EXPECTED_PARAMETERS))
def test_metadata_declares_exactly_the_pipeline_parameters(job):
    metadata = _metadata(job)
    assert metadata["name"] and metadata["description"]
    assert metadata["streaming"] is True
    names = [p["name"] for p in metadata["parameters"]]
    assert len(names) == len(set(names))
    assert set(names) == EXPECTED_PARAMETERS[job]
    for p in metadata["parameters"]:
        assert p["label"] and p["helpText"], p["name"]
        assert len(p["regexes"]) == 1, p["name"]
        assert p["regexes"][0].startswith("^") and p["regexes"][0].endswith("$"), p["name"]
        re.compile(p["regexes"][0])
        assert p["isOptional"] == (p["name"] in OPTIONAL_PARAMETERS[job]), p["name"]


SUBSCRIPTION_GOOD = ["projects/my-proj/subscriptions/beam-dp-counts-input-sub",
                     "projects/p-123456/subscriptions/abc"]
SUBSCRIPTION_BAD = ["", "beam-dp-input-sub", "projects/p/topics/t123",
                    "projects//subscriptions/abc", "projects/p/subscriptions/1abc",
                    "projects/p/subscriptions/ab", " projects/p/subscriptions/abc"]
TOPIC_GOOD = ["projects/my-proj/topics/beam-dp-counts-output", "projects/p/topics/dead_letter"]
TOPIC_BAD = ["", "projects/p/subscriptions/abc", "topics/abc", "projects/p/topics/a b c",
             "projects/p/topics/abc/extra"]
POSITIVE_DECIMAL_GOOD = ["1", "1.0", "0.5", "0.001", "10", "2.25", "1e-3", "1E2", "5e+1"]
POSITIVE_DECIMAL_BAD = ["", "0", "0.0", "00", "-1", "-0.5", "+1", "1.", ".5", "abc", "inf", "nan",
                        "1,5", "1 ", "0e3"]
DELTA_GOOD = ["0", "0.0", "0.5", "0.999999", "0.000001", "1e-6", "5E-7", "9.99e-1", "1e-10"]
DELTA_BAD = ["", "1", "1.0", "1.5", "-0.1", "2", "1e0", "1e-0", "10e-1", "1e6", ".5", "0.", "abc",
             "-1e-6"]
OPEN_UNIT_GOOD = ["0.5", "0.05", "0.999", "1e-3", "5e-2"]
OPEN_UNIT_BAD = ["", "0", "0.0", "1", "1.0", "1.5", "-0.5", "1e-0", "10e-1"]
POSITIVE_INT_GOOD = ["1", "60", "3600", "86400"]
POSITIVE_INT_BAD = ["", "0", "-1", "1.5", "01", "1e3", "abc", " 1"]
NONNEG_INT_GOOD = ["0", "1", "600"]
NONNEG_INT_BAD = ["", "-1", "1.0", "00", "01", "abc"]
GCS_GOOD = ["gs://my-bucket/rides/*.avro", "gs://b12/out", "gs://my.bucket_1/a/b/", "gs://abc"]
GCS_BAD = ["", "/tmp/out", "s3://bucket/x", "gs://", "gs://ab/x", "gs://My-Bucket/x",
           "gs://bucket/a b", " gs://bucket/x"]
TIME_GOOD = ["2024-06-02T00:00:00Z", "2024-06-02T00:00:00.5+02:00", "1717286400", "1717286400.25"]
# A reference to the secret, never the secret (a pasted key must not match).
STREAM_ID_GOOD = ["rides-eu", "my-proj/beam-dp/continual_counts", "a", "x" * 512]
STREAM_ID_BAD = ["", " rides", "a\tb", "a\nb", "x" * 513]
NOISE_KEY_GOOD = ["gcpsm:projects/my-proj/secrets/beam-dp-counts-noise-key/versions/12",
                  "gcpsm:projects/p/secrets/s/versions/3", "env:BEAM_DP_NOISE_KEY",
                  "file:/secrets/noise_key"]
NOISE_KEY_BAD = ["", "3f" * 32, "gcpsm:projects/p/secrets/s", "gcpsm:p/s/versions/1",
                 "gcpsm:projects/p/secrets/s/versions/latest", "gcpsm:projects/p/secrets/s/versions/0",
                 "env:1VAR", "env:", "file:relative/path", "sm:projects/p/secrets/s/versions/1",
                 " env:KEY", "env:KEY "]
TIME_BAD = ["", "2024-06-02", "2024-06-02T00:00:00", "-1", "1e9", "tomorrow", "2024-06-02 00:00:00Z"]

CASES = {
    "continual_counts": {
        "input_subscription": (SUBSCRIPTION_GOOD, SUBSCRIPTION_BAD),
        "output_topic": (TOPIC_GOOD, TOPIC_BAD),
        "dead_letter_topic": (TOPIC_GOOD, TOPIC_BAD),
        "epsilon": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "delta": (DELTA_GOOD, DELTA_BAD),
        "step_seconds": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "allowed_lateness_seconds": (NONNEG_INT_GOOD, NONNEG_INT_BAD),
        "public_keys": (["web", "web,ios,android", "New York,Paris"],
                        ["", ",", "web,", ",web", "web,,ios"]),
        "max_contributions_per_step": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "max_keys_per_unit": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "max_steps_per_unit": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "horizon_steps": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "mechanism": (["auto", "blt", "kary_tree", "binary_tree", "infinite_tree", "per_step"],
                      ["", "Auto", "blt ", "tree", "kary-tree"]),
        "estimator": (["textbook", "variance_reduced"],
                      ["", "Textbook", "honaker", "textbook ", "variance-reduced",
                       "textbookvariance_reduced"]),
        "timestamp_attribute": (["event_time", "ts", "eventTime.ms"],
                                ["", "1ts", "event time", "a/b"]),
        "lateness": (["watermark", "arrival"], ["", "Arrival", "arrival ", "publish_time"]),
        "input_avro": (GCS_GOOD, GCS_BAD),
        "output_avro": (GCS_GOOD, GCS_BAD),
        "dead_letter_avro": (GCS_GOOD, GCS_BAD),
        "public_keys_file": (GCS_GOOD, GCS_BAD),
        "start": (TIME_GOOD, TIME_BAD),
        "end": (TIME_GOOD, TIME_BAD),
        "num_shards": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "progress_every": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "noise_key": (NOISE_KEY_GOOD, NOISE_KEY_BAD),
        "stream_id": (STREAM_ID_GOOD, STREAM_ID_BAD),
    },
    "pmwg_queries": {
        "data_subscription": (SUBSCRIPTION_GOOD, SUBSCRIPTION_BAD),
        "query_subscription": (SUBSCRIPTION_GOOD, SUBSCRIPTION_BAD),
        "output_topic": (TOPIC_GOOD, TOPIC_BAD),
        "dead_letter_topic": (TOPIC_GOOD, TOPIC_BAD),
        "epsilon": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "delta": (DELTA_GOOD, DELTA_BAD),
        "alpha": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "beta": (OPEN_UNIT_GOOD, OPEN_UNIT_BAD),
        "domain_size": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "window_seconds": (NONNEG_INT_GOOD, NONNEG_INT_BAD),
        "start": (TIME_GOOD, TIME_BAD),
        "step_seconds": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "end": (TIME_GOOD, TIME_BAD),
        "data_avro": (GCS_GOOD, GCS_BAD),
        "query_avro": (GCS_GOOD, GCS_BAD),
        "output_avro": (GCS_GOOD, GCS_BAD),
        "dead_letter_avro": (GCS_GOOD, GCS_BAD),
        "noise_key": (NOISE_KEY_GOOD, NOISE_KEY_BAD),
        "stream_id": (STREAM_ID_GOOD, STREAM_ID_BAD),
    },
    "erm_digits": {
        "input_subscription": (SUBSCRIPTION_GOOD, SUBSCRIPTION_BAD),
        "output_topic": (TOPIC_GOOD, TOPIC_BAD),
        "ledger_topic": (TOPIC_GOOD, TOPIC_BAD),
        "dead_letter_topic": (TOPIC_GOOD, TOPIC_BAD),
        "epsilon": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "end_seconds": (["1", "1717286400"], ["", "0", "-1", "1.5", "01", "abc"]),
        "input_avro": (GCS_GOOD, GCS_BAD),
        "output_avro": (GCS_GOOD, GCS_BAD),
        "dead_letter_avro": (GCS_GOOD, GCS_BAD),
    },
    "boost_queries": {
        "data_subscription": (SUBSCRIPTION_GOOD, SUBSCRIPTION_BAD),
        "query_subscription": (SUBSCRIPTION_GOOD, SUBSCRIPTION_BAD),
        "output_topic": (TOPIC_GOOD, TOPIC_BAD),
        "dead_letter_topic": (TOPIC_GOOD, TOPIC_BAD),
        "epsilon": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "alpha": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "beta": (OPEN_UNIT_GOOD, OPEN_UNIT_BAD),
        "preset": (["tree_pmw_bypass", "laplace", "tree_pmw_bypass_warm"],
                   ["", "Laplace", "tree", "laplace ", "pmw"]),
        "blocks": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "data_avro": (GCS_GOOD, GCS_BAD),
        "query_avro": (GCS_GOOD, GCS_BAD),
        "output_avro": (GCS_GOOD, GCS_BAD),
        "dead_letter_avro": (GCS_GOOD, GCS_BAD),
        "noise_key": (NOISE_KEY_GOOD, NOISE_KEY_BAD),
        "stream_id": (STREAM_ID_GOOD, STREAM_ID_BAD),
        "noise": (["laplace", "gaussian"], ["", "Gaussian", "normal", "laplace ", "gauss"]),
        "delta": (DELTA_GOOD, DELTA_BAD),
        "cache_capacity": (["2", "9", "10", "100000"], ["", "0", "1", "-2", "02", "1.5", "1e3"]),
        "retention_blocks": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
        "replay_retention_seconds": (POSITIVE_INT_GOOD, POSITIVE_INT_BAD),
    },
    "yaml": {
        "config": (GCS_GOOD, GCS_BAD),
        "jinja_variables": (['{}', '{"input": "gs://b/x.avro", "output": "gs://b/out/"}'],
                            ["", "input=x", "[1]", '{"a": 1'],),
        "epsilon": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "delta": (DELTA_GOOD, DELTA_BAD),
        "rho": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
        "noise_key": (NOISE_KEY_GOOD, NOISE_KEY_BAD),
        "stream_id": (STREAM_ID_GOOD, STREAM_ID_BAD),
    },
}

LEDGER_CASES = {
    "ledger": (GCS_GOOD, GCS_BAD),
    "resume": (["true", "false"], ["", "True", "yes", "1", "true "]),
    "lifetime_epsilon": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
    "lifetime_delta": (DELTA_GOOD, DELTA_BAD),
    "lifetime_rho": (POSITIVE_DECIMAL_GOOD, POSITIVE_DECIMAL_BAD),
}
for _job in CASES:
    CASES[_job].update(LEDGER_CASES)
CASES["erm_digits"].update({"noise_key": (NOISE_KEY_GOOD, NOISE_KEY_BAD),
                            "stream_id": (STREAM_ID_GOOD, STREAM_ID_BAD)})

GOOD = [(job, name, value) for job, params in CASES.items()
        for name, (good, _) in params.items() for value in good]
BAD = [(job, name, value) for job, params in CASES.items()
       for name, (_, bad) in params.items() for value in bad]


def test_every_parameter_has_regex_cases():
    for job, expected in EXPECTED_PARAMETERS.items():
        assert set(CASES[job]) == expected


@pytest.mark.parametrize("job, name, value", GOOD)
def test_metadata_regex_accepts(job, name, value):
    assert _regex(job, name).fullmatch(value), f"{job}.{name} should accept {value!r}"


@pytest.mark.parametrize("job, name, value", BAD)
def test_metadata_regex_rejects(job, name, value):
    assert not _regex(job, name).fullmatch(value), f"{job}.{name} should reject {value!r}"


@pytest.mark.parametrize("job, name", [("continual_counts", "epsilon"), ("continual_counts", "delta"),
                                       ("pmwg_queries", "delta"), ("pmwg_queries", "beta")])
def test_accepted_dp_values_parse_into_range(job, name):
    """Every accepted value is a float in the documented range (the regex is not too loose)."""
    good, _ = CASES[job][name]
    for value in good:
        x = float(value)
        if name == "epsilon":
            assert x > 0
        elif name == "delta":
            assert 0 <= x < 1
        else:
            assert 0 < x < 1


def test_terraform_rendered_numbers_pass_metadata_regexes():
    """Terraform's tostring() renders numbers in plain decimal notation (tostring(1e-7) is
    "0.0000001", tostring(1.0) is "1"); those renderings must pass the regexes."""
    for value in ["1", "0.5", "0.0000001", "3600"]:
        assert _regex("continual_counts", "epsilon").fullmatch(value)
    for value in ["0", "0.5", "0.0000001", "0.000001"]:
        assert _regex("continual_counts", "delta").fullmatch(value)


@pytest.mark.parametrize("job", sorted(EXPECTED_PARAMETERS))
def test_launcher_accepts_every_metadata_parameter(job):
    """Every template parameter is one of the job's command-line --arguments (its parser)."""
    options = importlib.import_module(f"pipelines.{job}.options")
    accepted = {s[2:] for a in options.build_parser()._actions for s in a.option_strings
                if s.startswith("--")}
    missing = sorted(EXPECTED_PARAMETERS[job] - accepted)
    assert not missing, f"{job} parser lacks arguments {missing}"
    names = [p["name"] for p in _metadata(job)["parameters"]]
    assert set(names) <= accepted


def test_noise_key_regex_agrees_with_the_launchers_reference_check():
    """The template's first validation of noise_key and beam_dp's NoiseKeyRef (the second)
    accept and refuse the same values."""
    from beam_dp.errors import InvalidParamsError
    from beam_dp.noise import NoiseKeyRef
    for value in NOISE_KEY_GOOD:
        NoiseKeyRef(value)
    for value in NOISE_KEY_BAD:
        with pytest.raises(InvalidParamsError):
            NoiseKeyRef(value)

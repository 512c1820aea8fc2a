"""Settings that reach the network or the environment are the user's: from a tracked
``.eventmem/config.toml`` they are reported and ignored, unless approved with ``eventmem allow``;
from the environment, the user's own file or an untracked ``config.local.toml`` they apply."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import eventmem
from conftest import eventmem_command, git
from embedding_standins import StandIn, serve
from mcp_client import call, server_env
from mcp_client import serve as serve_stdio
from test_sampling import LONG, FakeModel, connect, extractive

from eventmem.journal.config import load_settings, network_settings

TOKEN = "hunter2-not-a-real-token"


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with serve() as running:
        yield running


def remote(standin: StandIn) -> str:
    return f"openai:nomic-embed-text@{standin.url}/v1?dim=768&key_env=SOME_SECRET"


def run(project: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SOME_SECRET=TOKEN, **extra)
    return eventmem(project, *args, env=env)


def saved(project: Path, text: str, **extra: str) -> subprocess.CompletedProcess[str]:
    result = run(project, "save", text, **extra)
    assert result.returncode == 0, result.stderr
    return result


def track(project: Path, text: str) -> Path:
    """Write and commit the project's config, as a merged pull request would."""
    config = project / ".eventmem" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(text, encoding="utf-8")
    git(project, "add", ".eventmem/config.toml")
    git(project, "commit", "-q", "-m", "config")
    return config


def embedder_in_use(project: Path) -> str:
    doctor = run(project, "doctor", "--json")
    model_id: str = json.loads(doctor.stdout)["cache"]["embedder"]
    return model_id


def test_a_tracked_remote_embedder_is_ignored_and_its_server_hears_nothing(project: Path, standin: StandIn) -> None:
    track(project, f'embedder = "{remote(standin)}"\n')

    result = saved(project, "The scheduler retries failed jobs three times with jitter.")
    assert standin.requests == []
    warning = result.stderr
    assert "embedder" in warning and "ignored" in warning and "eventmem allow" in warning
    assert f"sends memory text to {standin.url}/v1" in warning
    assert "reads the environment variable SOME_SECRET" in warning and TOKEN not in warning
    assert embedder_in_use(project).startswith("hashing")
    doctor = json.loads(run(project, "doctor", "--json").stdout)
    (ignored,) = doctor["ignored_settings"]
    assert ignored.startswith("config.toml: embedder = ")
    assert standin.requests == []


def test_the_same_embedder_from_the_environment_reaches_the_server_with_the_key(
    project: Path, standin: StandIn
) -> None:
    saved(project, "The scheduler retries failed jobs three times.", EVENTMEM_EMBEDDER=remote(standin))
    assert standin.requests
    assert {headers["Authorization"] for headers in standin.headers} == {f"Bearer {TOKEN}"}


def test_the_same_embedder_from_the_untracked_local_file_reaches_the_server(project: Path, standin: StandIn) -> None:
    assert run(project, "init").returncode == 0
    (project / ".eventmem" / "config.local.toml").write_text(f'embedder = "{remote(standin)}"\n', encoding="utf-8")
    assert ".eventmem/config.local.toml" not in git(project, "status", "--porcelain", "--untracked-files=all")

    result = saved(project, "The scheduler retries failed jobs three times.")
    assert standin.requests
    assert "ignored" not in result.stderr


def test_a_local_file_that_git_tracks_is_treated_as_the_repositorys(project: Path, standin: StandIn) -> None:
    assert run(project, "init").returncode == 0
    local = project / ".eventmem" / "config.local.toml"
    local.write_text(f'embedder = "{remote(standin)}"\n', encoding="utf-8")
    git(project, "add", "-f", ".eventmem/config.local.toml")

    result = saved(project, "The scheduler retries failed jobs three times.")
    assert standin.requests == []
    assert "config.local.toml (tracked by git" in result.stderr


def test_the_same_embedder_from_the_users_own_file_reaches_the_server(
    project: Path, standin: StandIn, tmp_path: Path
) -> None:
    user = tmp_path / "user-config"
    (user / "eventmem").mkdir(parents=True)
    (user / "eventmem" / "config.toml").write_text(f'embedder = "{remote(standin)}"\n', encoding="utf-8")
    track(project, 'embedder = "hashing"\n')

    saved(project, "The scheduler retries failed jobs three times.", XDG_CONFIG_HOME=str(user))
    assert standin.requests


def test_eventmem_allow_approves_the_tracked_file_until_it_changes(project: Path, standin: StandIn) -> None:
    config = track(project, f'embedder = "{remote(standin)}"\n')
    allowed = run(project, "allow")
    assert allowed.returncode == 0, allowed.stderr
    assert "reads the environment variable SOME_SECRET" in allowed.stdout
    assert not git(project, "status", "--porcelain", "--untracked-files=all").strip()  # nothing in the repo

    result = saved(project, "The scheduler retries failed jobs three times.")
    assert standin.requests and "ignored" not in result.stderr
    (approved,) = json.loads(run(project, "doctor", "--json").stdout)["allowed_settings"]
    assert approved.startswith("embedder = ")
    heard = len(standin.requests)

    config.write_text(config.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    result = saved(project, "A second note after the edit.")
    assert len(standin.requests) == heard
    assert "embedder" in result.stderr and "ignored" in result.stderr

    assert run(project, "allow").returncode == 0
    saved(project, "A third note after allowing again.")
    assert len(standin.requests) > heard
    heard = len(standin.requests)
    assert "approval withdrawn" in run(project, "allow", "--revoke").stdout
    saved(project, "A fourth note after the approval was withdrawn.")
    assert len(standin.requests) == heard


@pytest.mark.anyio
async def test_a_tracked_sampling_summarizer_is_ignored_and_the_clients_model_is_not_asked(project: Path) -> None:
    track(project, 'summarizer = "sampling"\n')
    model = FakeModel()
    async with connect(project, model) as client:
        out = await call(client, "save_context", context_text=LONG)
        recalled = await call(client, "retrieve_context", query="invoice pdf")
    assert out["summary"] == extractive(LONG)
    assert model.requests == []
    assert any("summarizer" in warning and "ignored" in warning for warning in recalled.get("warnings", []))


@pytest.mark.anyio
async def test_the_servers_startup_log_names_an_ignored_setting(
    project: Path, standin: StandIn, tmp_path: Path
) -> None:
    track(project, f'embedder = "{remote(standin)}"\n')
    errlog = tmp_path / "server.log"
    async with serve_stdio(project, server_env(SOME_SECRET=TOKEN), errlog) as session:
        await session.initialize()
        result = await session.call_tool("save_context", {"context_text": "Retries use jitter."})
        assert not result.is_error
    log = errlog.read_text(encoding="utf-8")
    assert log.count("embedder = ") == 1 and "ignored" in log
    assert standin.requests == []


def test_network_settings_names_what_reaches_the_network_or_the_environment() -> None:
    assert network_settings({"embedder": "hashing", "summarizer": "extractive", "fusion": "rrf"}) == []
    assert network_settings({"embedder": "onnx:minilm", "tools": "all", "render_ai_dir": ".ai"}) == []
    (openai,) = network_settings({"embedder": "openai:text-embedding-3-small"})
    assert "https://api.openai.com/v1" in openai and "OPENAI_API_KEY" in openai
    (ollama,) = network_settings({"embedder": "ollama:nomic-embed-text"})
    assert "sends memory text to http://127.0.0.1:11434" in ollama
    (loopback,) = network_settings({"embedder": "openai:m@http://localhost:8080/v1?dim=8&key_env=HOME"})
    assert "http://localhost:8080/v1" in loopback and "environment variable HOME" in loopback
    (sampling,) = network_settings({"summarizer": "sampling"})
    assert sampling.startswith('summarizer = "sampling"') and "client's model" in sampling
    (unreadable,) = network_settings({"embedder": "openai:m@ftp://host?bogus=1"})
    assert "network" in unreadable


def test_the_precedence_is_environment_then_local_then_user_then_tracked(project: Path, tmp_path: Path) -> None:
    base = project / ".eventmem"
    base.mkdir()
    tracked = base / "config.toml"
    tracked.write_text('fusion = "rrf"\nvector_weight = 0.1\nkeyword_weight = 0.2\nrecency_boost = 0.3\n')
    user = tmp_path / "xdg"
    (user / "eventmem").mkdir(parents=True)
    (user / "eventmem" / "config.toml").write_text("vector_weight = 0.4\nkeyword_weight = 0.5\n")
    (base / "config.local.toml").write_text("keyword_weight = 0.6\nrecency_boost = 0.7\n")
    environ = {"XDG_CONFIG_HOME": str(user), "EVENTMEM_RECENCY_BOOST": "0.8"}

    settings = load_settings(tracked, environ)
    config = settings.config
    assert (config.fusion, config.vector_weight, config.keyword_weight, config.recency_boost) == ("rrf", 0.4, 0.6, 0.8)
    assert settings.ignored == []


def test_a_tracked_weight_of_nan_is_reported_and_its_default_used_instead_of_ranking_by_nan(project: Path) -> None:
    saved(project, "The deploy script lives in tools/deploy.sh")
    track(project, "vector_weight = nan\n")
    result = run(project, "--json", "search", "deploy script")
    assert result.returncode == 0, result.stderr
    assert "NaN" not in result.stdout and json.loads(result.stdout)["results"]
    assert result.stderr.splitlines() == [
        "eventmem WARNING eventmem.service: config.toml: vector_weight = nan: expected a number from 0 to 100; "
        "ignored, the default 0.9 is used"
    ]


@pytest.mark.parametrize(
    "setting",
    [
        'embedder = "onnx:/opt/any/model.onnx?tokenizer=/etc/passwd&dim=8"',
        'embedder = "onnx:models/../../outside.onnx?tokenizer=tok.json&dim=8"',
        'embedder = "onnx:linked/model.onnx?tokenizer=linked/tokenizer.json&dim=8"',
        'render_ai_dir = ".git/hooks"',
        'export_dir = "/tmp"',
        "max_segment_bytes = 1",
        "compact_interval_seconds = 0.000001",
        "max_memory_bytes = 0",
        "no_such_setting = 1",
    ],
)
def test_a_tracked_setting_that_breaks_a_rule_is_ignored_saves_go_on_and_doctor_and_check_say_so(
    project: Path, tmp_path: Path, setting: str
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "tokenizer.json").write_text("{}", encoding="utf-8")
    (project / "linked").symlink_to(tmp_path / "elsewhere")
    saved(project, "The first note, before the setting.")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    git(project, "checkout", "-q", "-b", "feature")
    track(project, f"{setting}\n")
    key = setting.split(" =", 1)[0]
    result = saved(project, "The deploy script lives in tools/deploy.sh")
    (warning,) = [line for line in result.stderr.splitlines() if key in line]
    assert "ignored" in warning
    assert "passwd" not in result.stderr.replace(setting, "") and "Traceback" not in result.stderr
    search = run(project, "--json", "search", "deploy script")
    assert search.returncode == 0 and json.loads(search.stdout)["results"]
    doctor = run(project, "doctor", "--json")
    said = warning.removeprefix("eventmem WARNING eventmem.service: ")
    assert doctor.returncode == 1 and json.loads(doctor.stdout)["invalid_settings"] == [said]
    check = run(project, "check", "--base", "main", "--json")
    assert check.returncode == 1, check.stdout
    codes = [(f["code"], f["line"]) for f in json.loads(check.stdout)["findings"]]
    assert ("invalid-config", 1) in codes, codes


def test_a_huge_tracked_config_is_reported_in_one_line_without_being_read_whole(project: Path) -> None:
    (project / ".eventmem").mkdir()
    (project / ".eventmem" / "config.toml").write_bytes(b"# " + b"x" * (4 * 1_048_576) + b"\n")
    result = subprocess.run(eventmem_command("stats"), cwd=project, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "config.toml is larger than 1,048,576 bytes" in result.stderr

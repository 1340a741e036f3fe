"""A random mix of installs, local edits, bundle updates, injected faults and uninstalls never
leaves an orphan or a duplicate behind."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from bundle_operator.engine.apply import Blocked, InstallFailed
from bundle_operator.engine.record import Record
from bundle_operator.engine.uninstall import uninstall
from bundle_operator.platform import kinds
from bundle_operator.platform.client import PlatformClient
from bundle_operator.platform.models import AgentUpdate
from tests.integration.engine.conftest import FAST_RETRY, TOKEN
from tests.integration.engine.harness import (
    Store,
    arm_fault,
    clear_faults,
    parse,
    plan_and_apply,
    workspace_state,
)
from tests.integration.engine.test_engine_update import DOC, SETUP
from tests.integration.platform.platform_harness import PlatformProcess

pytestmark = [pytest.mark.integration]


def _v2(doc: dict[str, Any]) -> None:
    doc["version"] = "2.0.0"
    doc["agents"][0]["model"] = "gpt-6"
    doc["policies"] = []


def _v3(doc: dict[str, Any]) -> None:
    doc["version"] = "3.0.0"
    doc["skills"][0]["content"] = "---\nname: triage\ndescription: Label issues, v3\n---\nBody\n"
    doc["automations"].append(
        {"key": "weekly", "type": "cron", "agent": "bot", "schedule": "0 9 * * 1", "message": "Weekly"}
    )
    doc["mcps"] = doc["mcps"][:1]
    doc["agents"][0]["mcps"] = ["gh"]


VERSIONS = [copy.deepcopy(DOC)]
for change in (_v2, _v3):
    version = copy.deepcopy(DOC)
    change(version)
    VERSIONS.append(version)
PARSED = [parse(v) for v in VERSIONS]


STEPS: dict[str, int] = {"installed": 0, "failed": 0, "uninstalled": 0, "edited": 0}


def make_machine(platform: PlatformProcess) -> type[RuleBasedStateMachine]:
    class InstallMachine(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            self.loop = asyncio.new_event_loop()
            self.client = PlatformClient(platform.url, token=TOKEN, retry=FAST_RETRY)
            self.ws = f"sm-{uuid.uuid4().hex[:12]}"
            self.record = Record(installation="sm/inst", workspace=self.ws)
            self.released: set[str] = set()

        def run(self, coro: Any) -> Any:
            return self.loop.run_until_complete(coro)

        def owned(self) -> set[str]:
            return {p.id for r in self.record.entities for p in r.parts if not p.id.startswith("sec_")}

        def release_what_was_let_go(self, before: set[str], kept: list[str]) -> None:
            state = self.run(workspace_state(self.client, self.ws))
            present = {i for path, ids in state.items() if path != "secrets" for i in ids}
            let_go = (before - self.owned()) & present
            if let_go:
                assert kept, f"{let_go} left the record but nobody kept them"
            self.released |= let_go

        @rule(
            version=st.integers(0, 2),
            fault=st.none() | st.integers(0, 9),
            when=st.sampled_from(["before", "after"]),
        )
        def install(self, version: int, fault: int | None, when: str) -> None:
            before = self.owned()
            kept: list[str] = []
            if fault is not None:
                self.run(
                    arm_fault(
                        self.client,
                        method="POST",
                        path=f"/v1/workspaces/{self.ws}/*",
                        after=fault,
                        times=1,
                        status=422,
                        when=when,
                    )
                )
            try:
                result = self.run(
                    plan_and_apply(
                        self.client, self.ws, PARSED[version], SETUP, self.record, Store(self.record).persist
                    )
                )
                kept = result.kept
                STEPS["installed"] += 1
            except (Blocked, InstallFailed):
                STEPS["failed"] += 1
            finally:
                self.run(clear_faults(self.client))
            self.release_what_was_let_go(before, kept)

        @precondition(lambda self: self.record.find("agent:bot") is not None)
        @rule(field=st.sampled_from(["instructions", "description", "model"]))
        def edit_agent(self, field: str) -> None:
            found = self.record.find("agent:bot")
            if found is None or found.primary_id is None:
                return
            agent = self.run(self.client.get(self.ws, kinds.AGENTS, found.primary_id))
            self.run(
                self.client.update(
                    self.ws, kinds.AGENTS, agent.id, AgentUpdate(**{field: "edited"}), revision=agent.revision
                )
            )
            STEPS["edited"] += 1

        @precondition(lambda self: bool(self.record.entities))
        @rule()
        def uninstall(self) -> None:
            before = self.owned()
            result = self.run(uninstall(self.client, self.ws, self.record, Store(self.record).persist))
            assert result.complete
            STEPS["uninstalled"] += 1
            self.release_what_was_let_go(before, list(result.kept))

        @invariant()
        def no_orphan_no_duplicate(self) -> None:
            if not hasattr(self, "client"):
                return
            state = self.run(workspace_state(self.client, self.ws))
            present = {i for path, ids in state.items() if path != "secrets" for i in ids}
            assert present == self.owned() | self.released
            assert self.record.journal == []
            entities = [r.entity for r in self.record.entities]
            assert len(entities) == len(set(entities))

        def teardown(self) -> None:
            if hasattr(self, "client"):
                self.run(self.client.aclose())
                self.loop.close()

    return InstallMachine


def test_install_edit_update_fault_uninstall(engine_platform: PlatformProcess) -> None:
    machine = make_machine(engine_platform)
    machine.TestCase.settings = settings(
        max_examples=20, stateful_step_count=10, deadline=None, suppress_health_check=list(HealthCheck)
    )
    machine.TestCase().runTest()
    # The run really mixed the operations (hypothesis chose them; each must have happened).
    assert all(count > 0 for count in STEPS.values()), STEPS

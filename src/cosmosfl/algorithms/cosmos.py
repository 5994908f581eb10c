"""COSMOS: Clustered Output-based Server Models (paper, section 4).

Round t = 1 is the pre-training and clustering (PTC) phase, rounds t >= 2 the iterative
federated fine-tuning (IFFT) phase. Both run the same steps, numbered as the paper's PTC
steps 1-4 (its IFFT steps 1, 2, 3 are steps 1, 3, 4 here), plus the validated recipe's step 5
(docs/cosmos.md, "One round, step by step"):

    (1)  local training: f_i on D_i (E0 epochs the first time, E after) -> f_i^(t,1);
         each client sends f_i^(t,1)(U)
    (2)  clustering: π by pseudo-label distance (round 1, or every round with `recluster`;
         clients that missed it join later)
    (3a) the teacher f̄_k: its members' f_i^(t,1)(U) aggregated, at temperature T
    (3b) server-side distillation: h_k trained on U towards f̄_k, KL + λ·r_B (eq. 1); by
         held-out fidelity in the validated recipe
    (4)  client-side distillation: f_i distils h_π(i)(U), KL + λ·r_B (eq. 2) -> f_i^(t,2); in
         the validated recipe a client keeps the step only if its gate passes it
    (5)  deployment (validated recipe only): what each client deploys

Only soft labels on U cross the wire; no model parameters ever do. `run_round` is these steps
as one method each, `_local_training` and `_pseudo_labels` (1) to `_deploy` (5); an
extension, a diagnostic, a measurement hook and the Flower plumbing each have one helper of
their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np

from cosmosfl.algorithms.base import (
    Algorithm,
    DeferredMetrics,
    Federation,
    Metrics,
    Replies,
    RoundRecord,
    evaluate_clients,
    iter_clusters,
    map_public,
    renamed_setting,
    reply_metrics,
    train_local_with_pretraining,
)
from cosmosfl.algorithms.cosmos_membership import Membership, inherit_state
from cosmosfl.algorithms.cosmos_server import ServerFit, holdout_rows, train_server_model
from cosmosfl.algorithms.cosmos_settings import CLIENT_TARGETS, CosmosSettings, PublicProbe
from cosmosfl.algorithms.selection import select_on_validation
from cosmosfl.core.aggregation import aggregate, apply_temperature
from cosmosfl.core.seeds import derive_seed
from cosmosfl.core.tasks import Distill, Evaluate, PredictPublic
from cosmosfl.learners.base import Learner


class ServerStep(NamedTuple):
    """What step 3 leaves for steps 4 and 5."""

    teachers: dict[int, np.ndarray]  # f̄_k(U) at temperature T (step 3a), of the clusters trained
    losses: dict[int, dict[str, float]]  # their distillation losses
    h_public: dict[int, np.ndarray]  # h_k(U) for every cluster
    h_test: Metrics  # h_π(i) on each client's test split


class _ReportedModel:
    """`Cosmos.reported_model`: h_π(i) ("cluster_model") for the paper's recipe, what each
    client deploys ("deployed") for the validated one; on the class, the default recipe's."""

    def __get__(self, obj: Cosmos | None, owner: type) -> str:
        recipe = obj.recipe if obj is not None else "validated"
        return "cluster_model" if recipe == "paper" else "deployed"


@dataclass
class Cosmos(CosmosSettings, Algorithm):
    """COSMOS with the paper's defaults (docs/cosmos.md), except the server model size and
    the clustering (average linkage since 0.3, `changed_defaults`); the settings are
    `CosmosSettings`' (cosmos_settings.py).

    The round is here, as section 4's steps (the module's docstring); who belongs to which
    cluster (round-1 clustering, late joiners) is `Membership`'s (cosmos_membership.py), which
    returns the assignment; the server models h_k are Cosmos's own.
    """

    name: ClassVar[str] = "cosmos"
    display_name: ClassVar[str] = "COSMOS"
    reported_model: ClassVar[str] = _ReportedModel()  # type: ignore[assignment]
    # -- server state ------------------------------------------------------------------------
    cluster_models: dict[int, Learner] = field(default_factory=dict, init=False)  # h_k
    # Clients that have finished local training once (they get E0 epochs until they have).
    pretrained: set[int] = field(default_factory=set, init=False)
    # π and the clustering's state, built when first needed; it reads the settings above.
    _membership: Membership | None = field(default=None, init=False, repr=False)
    _pending_models: dict[int, Any] | None = field(default=None, init=False, repr=False)

    # -- the round: section 4's steps -------------------------------------------------------
    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        """PTC in round 1, IFFT after: the same steps, only the epochs of step 1 and whether
        step 2 clusters differ (docs/cosmos.md, "One round, step by step")."""
        record = RoundRecord()
        self._restore_models(fed)
        trained = self._local_training(fed)  # (1) f_i^(t,1)
        probs, own_test = self._pseudo_labels(fed, trained, record, round_num)  # (1) f_i(U)
        self._clustering(fed, probs, round_num)  # (2) π, and an h_k for each new cluster
        teachers = self._cluster_teachers(fed, probs)  # (3a) f̄_k
        server = self._server_distillation(fed, teachers, record)  # (3b) h_k
        self._select_on_validation(fed, record, server.h_test, own_test)  # extension
        own = self._client_distillation(fed, server, record)  # (4) f_i^(t,2)
        self._deploy(fed, record, server, own)  # (5) what each client deploys
        self._summarise(record, server)
        self._public_probe(record, probs, server)  # measurement hook
        return record

    def _local_training(self, fed: Federation) -> Replies:
        """Step 1: every client trains f_i on D_i, E0 epochs until it has once, then E."""
        with fed.phase("local_training"):
            return train_local_with_pretraining(fed, self.pretrained, self.epochs_for)

    def _pseudo_labels(
        self, fed: Federation, trained: Replies, record: RoundRecord, round_num: int
    ) -> tuple[dict[int, np.ndarray], Metrics]:
        """Step 1, its end: every client sends f_i^(t,1)(U); then f_i^(t,1) is evaluated
        ("local"). Returns the pseudo-labels of the clients that answered and that evaluation."""
        with fed.phase("prediction"):
            replies = fed.send(dict.fromkeys(fed.client_ids, PredictPublic(codec=self.codec)))
            probs = {cid: np.asarray(r.arrays["probs"]) for cid, r in replies.items()}
            self.pretrained.update(trained)  # read after step 2's replies (no round trip)
        with fed.phase("evaluation"):
            own_test = evaluate_clients(fed)
            record.add_metrics("local", own_test)  # f_i^(t,1)
        if not probs:
            raise RuntimeError(f"round {round_num}: no client returned pseudo-labels")
        return probs, own_test

    def _clustering(self, fed: Federation, probs: dict[int, np.ndarray], round_num: int) -> None:
        """Step 2: π from the pseudo-label distances (round 1, or every round with
        `recluster`; else late joiners only), then a server model for each new cluster."""
        with fed.phase("clustering"):
            update = self.membership.update(probs, fed, round_num)
            old, self.cluster_models = self.cluster_models, {}
            if not update.reclustered:
                self.cluster_models.update(old)
            for k, source in update.new_clusters.items():
                self.cluster_models[k] = self._new_server_model(fed, k)
                if source is not None:  # re-clustering: the model most members came from
                    own = self.cluster_models[k].get_state()
                    self.cluster_models[k].set_state(inherit_state(old[source].get_state(), own))

    def _cluster_teachers(
        self, fed: Federation, probs: dict[int, np.ndarray]
    ) -> dict[int, np.ndarray]:
        """Step 3a: each cluster's teacher f̄_k(U), the paper's central quantity: the mean (or
        the robust `aggregation`) of its answering members' f_i^(t,1)(U), at temperature T. A
        cluster none of whose members answered has none: its h_k keeps last round's state."""
        teachers = {}
        with fed.phase("server_distillation"):
            for k, members in iter_clusters(self.assignment):
                answered = [probs[c] for c in members if c in probs]
                if not answered:
                    fed.log(f"cluster {k}: no member answered; its model keeps last round's state")
                    continue
                teachers[k] = apply_temperature(
                    aggregate(answered, self.aggregation, trim_fraction=self.trim_fraction),
                    self.temperature,
                )
        return teachers

    def _server_distillation(
        self, fed: Federation, teachers: dict[int, np.ndarray], record: RoundRecord
    ) -> ServerStep:
        """Step 3b: each h_k with a teacher distils f̄_k on U (eq. 1; `_server_fit` says how);
        then h_π(i) is evaluated ("cluster_model", the paper's reported number)."""
        with fed.phase("server_distillation"):
            losses, h_public = self._train_cluster_models(fed, teachers)
        with fed.phase("evaluation"):
            h_test = fed.evaluate_server_models(self._deployed_models())
            record.add_metrics("cluster_model", h_test)  # h_π(i)
        return ServerStep(teachers, losses, h_public, h_test)

    def _client_distillation(self, fed: Federation, server: ServerStep, record: RoundRecord) -> Any:
        """Step 4: each client distils h_π(i)(U) into f_i (eq. 2; the validated recipe's clients
        keep the step only if their gate passes it); then f_i^(t,2) is evaluated
        ("client_model"). Returns that evaluation."""
        with fed.phase("client_distillation"):
            # One request per cluster, shared by its members: its targets are encoded once.
            gate = self.client_gate_used
            both = gate and self.gate_teachers == "both"
            requests = {
                k: Distill(
                    np.asarray(t, dtype=np.float32),
                    epochs=self.distill_epochs,
                    lam=self.lam,
                    client_weights=self.client_weights,
                    codec=self.codec,
                    gate=gate,
                    gate_margin=self.gate_margin if gate else 0.0,
                    alternative=(
                        np.asarray(server.teachers[k], dtype=np.float32)
                        if both and k in server.teachers
                        else None
                    ),
                )
                for k, t in self._distillation_targets(server).items()
            }
            distilled = reply_metrics(
                fed.send({cid: requests[k] for cid, k in self.assignment.items()})
            )
            # KL and r_B of each client's distillation (first and last epoch): does f_i fit h_k?
            # With the gate, also whether the client kept the step (handlers/gate.py).
            record.add_info("client_distill", self._note_unjudged(fed, distilled, gate))
        with fed.phase("evaluation"):
            own = evaluate_clients(fed)
            record.add_metrics("client_model", own)  # f_i^(t,2)
        return own

    @staticmethod
    def _note_unjudged(fed: Federation, distilled: Metrics, gate: bool) -> Metrics:
        """`distilled`, saying when first read which clients' gates could not judge (their
        slices are too small)."""

        def read() -> Metrics:
            unjudged = sorted(c for c, m in distilled.items() if m.get("gate_unjudged"))
            if gate and unjudged:
                fed.log(
                    f"clients {unjudged} hold too few validation rows for their gate to judge "
                    "a distillation step: they keep their models (raise data.validation_fraction)"
                )
            return distilled

        return DeferredMetrics(read)

    def _deploy(
        self, fed: Federation, record: RoundRecord, server: ServerStep, own: Metrics
    ) -> None:
        """Step 5 (validated recipe only): what each client deploys (evaluation point
        "deployed", the recipe's reported model): its own model after the gated step 4, built
        from nothing but the soft labels the protocol sends; the record says which teacher
        each client kept."""
        if self.recipe == "paper":
            return
        with fed.phase("evaluation"):
            deployed = self._deployed_metrics(fed, own)
            record.add_metrics("deployed", deployed)
            if self.deploy == "mix":  # per client, the weight α of its own model in the mix
                record.add_info(
                    "deployed_mix", {c: {"alpha": m.get("alpha", 1.0)} for c, m in deployed.items()}
                )
            record.add_info(
                "server_fidelity",
                {
                    k: {
                        name: v
                        for name, v in server.losses[k].items()
                        if name.startswith("fidelity_") or name in ("epochs", "best_epoch")
                    }
                    for k in sorted(server.losses)
                },
            )

    def _deployed_metrics(self, fed: Federation, own: Metrics) -> Metrics:
        """The own model's metrics (`deploy: own`), or those of each client's validated mix
        α·f_i + (1 − α)·h_π(i) with the α chosen (`deploy: mix`, metric `alpha`; clients the
        engine cannot give h_π(i)'s predictions keep their own model)."""
        if self.deploy != "mix":
            return own
        models = self._deployed_models()
        h_val = fed.predict_server_models(models, "validation")
        h_test = fed.predict_server_models(models, "test")
        mixed = [cid for cid in sorted(models) if cid in h_val and cid in h_test]
        if not mixed:
            return own
        requests = {cid: Evaluate(mix_validation=h_val[cid], mix_test=h_test[cid]) for cid in mixed}
        out = dict(reply_metrics(fed.send(requests)))
        return {**{c: {**m, "alpha": 1.0} for c, m in own.items() if c not in out}, **out}

    def _summarise(self, record: RoundRecord, server: ServerStep) -> None:
        """The round's clusters and server-side losses, for the record."""
        record.info.update(
            clusters={int(c): int(k) for c, k in sorted(self.assignment.items())},
            K=len(self.cluster_models),
            threshold=self.b0_used,  # the record's `threshold` is the B0 used
            updated_clusters=sorted(server.teachers),
            # KL(f̄_k ‖ h_k) and r_B of each cluster model's training: does h_k fit its teacher?
            server_distill={int(k): v for k, v in sorted(server.losses.items())},
        )

    # -- the extension, the diagnostic, the hook and the engine plumbing, one place each ------
    def _select_on_validation(
        self, fed: Federation, record: RoundRecord, h_test: Metrics, own_test: Metrics
    ) -> None:
        """Extension (`select_on_validation`): each client keeps whichever of h_π(i) and
        f_i^(t,1) is better on its validation slice; evaluation point "selected"."""
        if not self.select_on_validation:
            return
        with fed.phase("evaluation"):
            selected = select_on_validation(fed, self._deployed_models(), h_test, own_test)
            record.add_metrics("selected", selected)
            record.add_info("selection", selected)  # per client: which model it kept

    def _distillation_targets(self, server: ServerStep) -> dict[int, np.ndarray]:
        """What each cluster's members distil: h_k(U) at temperature T (T acts on every
        distillation target, docs/cosmos.md "temperature T"). Diagnostic (`client_targets:
        teacher`): the teacher f̄_k(U) instead, skipping the server model."""
        targets = {k: apply_temperature(p, self.temperature) for k, p in server.h_public.items()}
        if self.client_targets == "teacher":
            targets.update(server.teachers)
        return targets

    def _public_probe(
        self, record: RoundRecord, probs: dict[int, np.ndarray], server: ServerStep
    ) -> None:
        """Measurement hook (`public_probe`), not the protocol: per trained cluster, what the
        experiment layer measures on U with labels the algorithm never sees."""
        if self.public_probe is None:
            return
        record.info["public_probe"] = {
            int(k): self.public_probe(
                members,
                server.teachers[k],
                server.h_public[k],
                [probs[c] for c in members if c in probs],
            )
            for k, members in iter_clusters(self.assignment)
            if k in server.teachers
        }

    # -- membership π (cosmos_membership.py) and the server models h_k -------------------------
    @property
    def membership(self) -> Membership:
        """π and the clustering's state (step 2); built when first needed (a round or a
        restore), reading the clustering settings from this algorithm."""
        if self._membership is None:
            self._membership = Membership(self)
        return self._membership

    @property
    def assignment(self) -> dict[int, int]:
        """π: client -> cluster."""
        return self.membership.assignment

    @property
    def b0_used(self) -> float | None:
        """The B0 the last clustering used (fixed, or chosen by `b0_rule`)."""
        return self.membership.b0_used

    @property
    def join_distance(self) -> float | None:
        """How close a client that missed the clustering must be to join a cluster."""
        return self.membership.join_distance

    def _deployed_models(self) -> dict[int, Learner]:
        """h_π(i) for every clustered client i."""
        return {cid: self.cluster_models[k] for cid, k in self.assignment.items()}

    # -- checkpoints -------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        if self._pending_models is not None:  # restored but not yet rebuilt: pass it on
            models = dict(self._pending_models)
        else:
            models = {k: h.get_state() for k, h in self.cluster_models.items()}
        return {
            "assignment": dict(self.assignment),
            "b0_used": self.b0_used,
            "join_distance": self.join_distance,
            "cluster_models": models,
            "pretrained": sorted(self.pretrained),
            "last_probs": dict(self.membership.last_probs),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        m = self.membership
        m.assignment = {int(c): int(k) for c, k in state["assignment"].items()}
        # Checkpoints written before 0.3 name them threshold_used and join_threshold.
        m.b0_used = state["b0_used"] if "b0_used" in state else state["threshold_used"]
        m.join_distance = state.get("join_distance", state.get("join_threshold"))
        # Checkpoints from before these keys existed: every clustered client had pre-trained.
        self.pretrained = set(state.get("pretrained", m.assignment))
        m.last_probs = {int(c): np.asarray(p) for c, p in state.get("last_probs", {}).items()}
        # Server models need the federation (input shape, classes, device) to be rebuilt:
        # that happens at the start of the next round.
        self._pending_models = {int(k): v for k, v in state["cluster_models"].items()}
        self.cluster_models = {}

    def _restore_models(self, fed: Federation) -> None:
        if self._pending_models is None:
            return
        for k, model_state in sorted(self._pending_models.items()):
            self.cluster_models[k] = self._new_server_model(fed, k)
            self.cluster_models[k].set_state(model_state)
        self._pending_models = None

    def _new_server_model(self, fed: Federation, k: int) -> Learner:
        factory = self.server_learner
        if factory is None:
            raise ValueError(
                "COSMOS has no server_learner to build its cluster models with: "
                "cosmosfl.simulate and run_experiment provide one from the server_* settings; "
                "when driving an engine yourself, pass server_learner="
                "torch_server_learner(...) (the experiment layer's) or a factory of your own"
            )
        return factory(
            tuple(fed.public_x.shape[1:]),
            fed.num_classes,
            derive_seed(fed.seed, "cosmos-server", k),
        )

    def _server_fit(self, fed: Federation) -> ServerFit:
        """How step 3b trains this round's h_k (cosmos_server.py): the recipe's server training,
        on the same held-out rows of U every round."""
        mode = self.server_training_used
        fidelity = mode == "fidelity"
        return ServerFit(
            mode=mode,
            epochs=self.server_epochs,
            lam=self.lam,
            holdout=(
                holdout_rows(len(fed.public_x), self.server_holdout, fed.seed) if fidelity else None
            ),
            max_epochs=self.server_max_epochs,
            patience=self.server_patience,
            lr=self.server_lr_used if fidelity or self.server_lr is not None else None,
        )

    def _train_cluster_models(
        self, fed: Federation, teachers: dict[int, np.ndarray]
    ) -> tuple[dict[int, dict[str, float]], dict[int, np.ndarray]]:
        """Train each h_k that has a teacher f̄_k (step 3a) towards it; returns their training
        losses and every h_k(U). The K trainings are independent (same U, own teacher, own
        seeded model), so the engine may run them in its worker processes (`map_public`)."""
        fit = self._server_fit(fed)
        jobs = [(self.cluster_models[k], t, fit) for k, t in teachers.items()]
        losses, trained_public = {}, {}
        for k, (model, stats, h_u) in zip(
            teachers, map_public(fed, train_server_model, jobs), strict=True
        ):
            self.cluster_models[k] = model  # the trained h_k (a copy when it came from a worker)
            losses[k] = stats
            trained_public[k] = h_u
        h_public = {
            k: trained_public[k] if k in trained_public else h.predict_proba(fed.public_x)
            for k, h in self.cluster_models.items()
        }
        return losses, h_public


# Deprecated names (renamed in 0.3), read-only: three settings and two pieces of state.
Cosmos.threshold = renamed_setting("threshold", "b0")  # type: ignore[assignment]
Cosmos.threshold_rule = renamed_setting("threshold_rule", "b0_rule")  # type: ignore[assignment]
Cosmos.threshold_search = renamed_setting("threshold_search", "b0_search")  # type: ignore[assignment]
Cosmos.threshold_used = renamed_setting("threshold_used", "b0_used")  # type: ignore[attr-defined]
Cosmos.join_threshold = renamed_setting("join_threshold", "join_distance")  # type: ignore[attr-defined]


__all__ = ["CLIENT_TARGETS", "Cosmos", "CosmosSettings", "PublicProbe", "ServerStep"]

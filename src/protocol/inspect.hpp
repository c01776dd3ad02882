#pragma once
// The one place Loom's plain message types meet CAF: their inspect() overloads, so that CAF can
// copy, compare, print and serialise them in messages. Every component's types.hpp stays free
// of CAF; register_loom_types (type_registry.cpp) names each type once for the actor system.

#include <caf/meta/type_name.hpp>

#include "types/common.hpp"
#include "types/fabric.hpp"
#include "types/gateway.hpp"
#include "types/generation.hpp"
#include "types/scheduler.hpp"
#include "types/store.hpp"

namespace loom {

// -- core ------------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cross_connect& x) {
  return f(caf::meta::type_name("cross_connect"), x.in, x.out);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, xc_diff& x) {
  return f(caf::meta::type_name("xc_diff"), x.removes, x.adds);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, apply_report& x) {
  return f(caf::meta::type_name("apply_report"), x.latency_ns, x.ready_ns, x.attempts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, driver_health& x) {
  return f(caf::meta::type_name("driver_health"), x.device, x.connected, x.applies, x.failures,
           x.cross_connects, x.inputs, x.outputs, x.last_error, x.failed_ports);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ocs_request& x) {
  return f(caf::meta::type_name("ocs_request"), x.device, x.id, x.kind, x.diff);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ocs_reply& x) {
  return f(caf::meta::type_name("ocs_reply"), x.device, x.id, x.failure, x.error, x.report,
           x.health, x.cross_connects);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ocs_fault& x) {
  return f(caf::meta::type_name("ocs_fault"), x.failed_ports, x.refuse_next, x.timeout_next,
           x.refuse_probability, x.timeout_probability);
}

// -- store -----------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, record_write& x) {
  return f(caf::meta::type_name("record_write"), x.kind, x.key, x.value, x.erase, x.erase_to);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch& x) {
  return f(caf::meta::type_name("write_batch"), x.records, x.events, x.sync, x.first_event_seq);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stored_record& x) {
  return f(caf::meta::type_name("stored_record"), x.key, x.value);
}

// -- scheduler -------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rl_job& x) {
  return f(caf::meta::type_name("rl_job"), x.id, x.rollout_gpus, x.training_gpus,
           x.rollout_memory_gb, x.training_memory_gb, x.slo, x.rollout_s, x.training_s, x.sync_s,
           x.name, x.model, x.max_response_tokens, x.batch_size, x.multi_turn, x.model_gb,
           x.iterations, x.iterations_before, x.profile);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_member& x) {
  return f(caf::meta::type_name("group_member"), x.job, x.rollout_nodes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_devices& x) {
  return f(caf::meta::type_name("node_devices"), x.node, x.devices);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, phase_grant& x) {
  return f(caf::meta::type_name("phase_grant"), x.job, x.phase, x.gpus, x.switch_s, x.cold,
           x.iteration, x.group, x.devices, x.profiling);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_profile& x) {
  return f(caf::meta::type_name("job_profile"), x.job, x.rollout_s, x.training_s,
           x.rollout_memory_gb, x.training_memory_gb);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gpu_resize& x) {
  return f(caf::meta::type_name("gpu_resize"), x.job, x.gpus, x.devices);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, placement_reply& x) {
  return f(caf::meta::type_name("placement_reply"), x.job, x.kind, x.group, x.rollout_nodes,
           x.training_nodes, x.delta_cost_per_hour, x.cost_per_hour, x.reason,
           x.group_cost_per_hour);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_report& x) {
  return f(caf::meta::type_name("node_report"), x.node, x.failed, x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_outcome& x) {
  return f(caf::meta::type_name("node_outcome"), x.failed_jobs, x.replanning);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_progress& x) {
  return f(caf::meta::type_name("job_progress"), x.job, x.group, x.position, x.round,
           x.iterations_done);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_joined& x) {
  return f(caf::meta::type_name("member_joined"), x.job, x.group, x.staging_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_status& x) {
  return f(caf::meta::type_name("member_status"), x.job, x.iterations_done, x.phase, x.staged,
           x.running, x.waiting, x.overruns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_status& x) {
  return f(caf::meta::type_name("job_status"), x.job, x.state, x.group, x.slo, x.solo_s,
           x.reason, x.iterations, x.iterations_completed, x.rollout_nodes, x.training_nodes,
           x.member);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scheduler_census& x) {
  return f(caf::meta::type_name("scheduler_census"), x.jobs, x.groups, x.executors);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_status& x) {
  return f(caf::meta::type_name("group_status"), x.group, x.jobs, x.rollout_nodes,
           x.training_nodes, x.saturated, x.cost_per_hour, x.iterations_done);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, iteration_record& x) {
  return f(caf::meta::type_name("iteration_record"), x.job, x.group, x.index, x.end_ns,
           x.duration_s, x.solo_s, x.planned_solo_s, x.slo);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_record& x) {
  return f(caf::meta::type_name("cluster_record"), x.time_ns, x.event, x.job, x.cost_per_hour,
           x.rollout_gpus, x.training_gpus, x.decision_us);
}

// -- generation ------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, parallel_config& x) {
  return f(caf::meta::type_name("parallel_config"), x.tp, x.ep, x.ffn_gpus);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_deployment& x) {
  return f(caf::meta::type_name("gen_deployment"), x.parallel, x.instances, x.latency,
           x.latency_instances);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_pending& x) {
  return f(caf::meta::type_name("gen_pending"), x.id, x.prompt_tokens, x.generated, x.instance);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_snapshot& x) {
  return f(caf::meta::type_name("gen_snapshot"), x.step, x.deployment, x.gpu_budget, x.pending,
           x.finished_outputs, x.standby);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_decision& x) {
  return f(caf::meta::type_name("gen_decision"), x.deployment, x.assignment, x.reconfigure,
           x.objective_s, x.current_s, x.switch_s, x.migrate_s, x.solve_ms,
           x.forecast_mean_tokens);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_request& x) {
  return f(caf::meta::type_name("gen_request"), x.id, x.context_tokens, x.pinned, x.generated,
           x.move.transfer_s, x.move.recompute_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_worker& x) {
  return f(caf::meta::type_name("gen_worker"), x.id, x.running, x.waiting, x.kv_free_tokens,
           x.max_batch, x.decode_rate_tps, x.pace_tps, x.rate_spread_tps, x.peak_tps);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, migration& x) {
  return f(caf::meta::type_name("migration"), x.request, x.from, x.to, x.was_waiting);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, engine_hello& x) {
  return f(caf::meta::type_name("engine_hello"), x.engine, x.node, x.gpus, x.restarted,
           x.data_address);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_state& x) {
  return f(caf::meta::type_name("request_state"), x.id, x.prompt_tokens, x.generated, x.running,
           x.kv_resident);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, instance_stats& x) {
  return f(caf::meta::type_name("instance_stats"), x.engine, x.instance, x.epoch, x.requests,
           x.kv_free_tokens, x.kv_capacity_tokens, x.max_batch, x.decode_rate_tps,
           x.preemptions);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_done& x) {
  return f(caf::meta::type_name("request_done"), x.id, x.output_tokens, x.finished_at_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, requests_finished& x) {
  return f(caf::meta::type_name("requests_finished"), x.engine, x.step, x.done);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, instance_slot& x) {
  return f(caf::meta::type_name("instance_slot"), x.instance, x.engines, x.config);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admitted_request& x) {
  return f(caf::meta::type_name("admitted_request"), x.id, x.prompt_tokens, x.generated,
           x.kv_transfer, x.kv_source, x.source_address);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_command& x) {
  return f(caf::meta::type_name("gen_command"), x.id, x.engine, x.kind, x.epoch, x.config,
           x.slots, x.instance, x.step, x.resume, x.requests, x.moves, x.router_address);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, command_ack& x) {
  return f(caf::meta::type_name("command_ack"), x.command, x.engine, x.ok, x.detail, x.released,
           x.elapsed_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_batch& x) {
  return f(caf::meta::type_name("step_batch"), x.step, x.requests, x.data_address);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_placement& x) {
  return f(caf::meta::type_name("step_placement"), x.step, x.deployment, x.reconfigured,
           x.instances, x.engines, x.done, x.last_finished_at_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_outcome& x) {
  return f(caf::meta::type_name("step_outcome"), x.deployment, x.step, x.last_finished_at_ns,
           x.requests, x.aborted, x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_record& x) {
  return f(caf::meta::type_name("gen_record"), x.deployment, x.kind, x.step, x.step_s, x.pending,
           x.detail, x.mode, x.reconfigure, x.solve_ms, x.forecast_error, x.forecast_mean_error,
           x.preemptions, x.switch_s, x.kv_s, x.planned_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_counters& x) {
  return f(caf::meta::type_name("gen_counters"), x.reconfigurations, x.migrations,
           x.kv_transfers, x.kv_recomputes, x.engines_lost, x.commands_retried,
           x.commands_abandoned);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_status& x) {
  return f(caf::meta::type_name("gen_status"), x.deployment, x.model, x.gpus, x.current,
           x.epoch, x.engines, x.instances, x.step, x.step_active, x.pending, x.finished,
           x.phase, x.forecast_mean_tokens, x.recent, x.counters, x.last_solve_ms,
           x.last_forecast_error);
}

// -- fabric ----------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_ref& x) {
  return f(caf::meta::type_name("rank_ref"), x.server, x.gpu);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, primitive_share& x) {
  return f(caf::meta::type_name("primitive_share"), x.kind, x.fraction);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fabric_intent& x) {
  return f(caf::meta::type_name("fabric_intent"), x.owner, x.stage, x.mix, x.members, x.bytes,
           x.group_size, x.receive_weights, x.predicted, x.iteration, x.layer);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, commit_window& x) {
  return f(caf::meta::type_name("commit_window"), x.kind, x.expected_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, circuit_count& x) {
  return f(caf::meta::type_name("circuit_count"), x.a, x.b, x.circuits);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, circuit_layout& x) {
  return f(caf::meta::type_name("circuit_layout"), x.agg, x.core);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fabric_decision& x) {
  return f(caf::meta::type_name("fabric_decision"), x.owner, x.outcome, x.reason, x.version,
           x.circuits, x.changed, x.reconfig_s, x.exposed_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fabric_plan_status& x) {
  return f(caf::meta::type_name("fabric_plan_status"), x.owner, x.stage, x.version, x.circuits,
           x.devices);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, opus_job_status& x) {
  return f(caf::meta::type_name("opus_job_status"), x.job, x.rails, x.topo, x.first_port,
           x.ranks, x.fallback);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fabric_listing& x) {
  return f(caf::meta::type_name("fabric_listing"), x.plans, x.opus);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_load& x) {
  return f(caf::meta::type_name("expert_load"), x.owner, x.iteration, x.layer, x.tokens);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, opus_trace& x) {
  return f(caf::meta::type_name("opus_trace"), x.stage, x.digits);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, opus_phase& x) {
  return f(caf::meta::type_name("opus_phase"), x.stage, x.digit, x.first, x.last);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, opus_job& x) {
  return f(caf::meta::type_name("opus_job"), x.job, x.pp, x.symmetrical, x.rails, x.initial,
           x.traces, x.first_port);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, opus_registration& x) {
  return f(caf::meta::type_name("opus_registration"), x.topo, x.phases,
           x.first_port, x.servers);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, topo_write& x) {
  return f(caf::meta::type_name("topo_write"), x.group, x.op_index, x.group_size, x.stage,
           x.digit);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, topo_ack& x) {
  return f(caf::meta::type_name("topo_ack"), x.topo, x.fallback);
}

// -- gateway ---------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_frame& x) {
  return f(caf::meta::type_name("wire_frame"), x.identity, x.payload, x.role, x.authenticated,
           x.key, x.single_part);
}

} // namespace loom

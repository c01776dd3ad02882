#include "protocol/type_registry.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include "protocol/actors.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"

namespace loom {

void register_loom_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<record_kind>("loom.record_kind");
  cfg.add_message_type<record_write>("loom.record_write");
  cfg.add_message_type<write_batch>("loom.write_batch");
  cfg.add_message_type<stored_record>("loom.stored_record");
  cfg.add_message_type<std::vector<stored_record>>("loom.stored_records");
  cfg.add_message_type<cross_connect>("loom.cross_connect");
  cfg.add_message_type<std::vector<cross_connect>>("loom.cross_connects");
  cfg.add_message_type<xc_diff>("loom.xc_diff");
  cfg.add_message_type<apply_report>("loom.apply_report");
  cfg.add_message_type<driver_health>("loom.driver_health");
  cfg.add_message_type<ocs_fault>("loom.ocs_fault");
  cfg.add_message_type<ocs_request>("loom.ocs_request");
  cfg.add_message_type<ocs_reply>("loom.ocs_reply");
  cfg.add_message_type<rl_job>("loom.rl_job");
  cfg.add_message_type<group_member>("loom.group_member");
  cfg.add_message_type<phase_kind>("loom.phase_kind");
  cfg.add_message_type<phase_grant>("loom.phase_grant");
  cfg.add_message_type<gpu_resize>("loom.gpu_resize");
  cfg.add_message_type<job_profile>("loom.job_profile");
  cfg.add_message_type<placement_reply>("loom.placement_reply");
  cfg.add_message_type<job_progress>("loom.job_progress");
  cfg.add_message_type<node_report>("loom.node_report");
  cfg.add_message_type<node_outcome>("loom.node_outcome");
  cfg.add_message_type<std::vector<job_progress>>("loom.job_progresses");
  cfg.add_message_type<member_joined>("loom.member_joined");
  cfg.add_message_type<member_status>("loom.member_status");
  cfg.add_message_type<job_state>("loom.job_state");
  cfg.add_message_type<job_status>("loom.job_status");
  cfg.add_message_type<std::vector<job_status>>("loom.job_statuses");
  cfg.add_message_type<group_status>("loom.group_status");
  cfg.add_message_type<scheduler_census>("loom.scheduler_census");
  cfg.add_message_type<std::vector<group_status>>("loom.group_statuses");
  cfg.add_message_type<iteration_record>("loom.iteration_record");
  cfg.add_message_type<cluster_record>("loom.cluster_record");
  cfg.add_message_type<std::vector<int>>("loom.ints");
  cfg.add_message_type<gen_deployment>("loom.gen_deployment");
  cfg.add_message_type<gen_pending>("loom.gen_pending");
  cfg.add_message_type<gen_snapshot>("loom.gen_snapshot");
  cfg.add_message_type<gen_decision>("loom.gen_decision");
  cfg.add_message_type<gen_worker>("loom.gen_worker");
  cfg.add_message_type<std::vector<gen_worker>>("loom.gen_workers");
  cfg.add_message_type<migration>("loom.migration");
  cfg.add_message_type<std::vector<migration>>("loom.migrations");
  cfg.add_message_type<std::vector<int64_t>>("loom.int64s");
  cfg.add_message_type<engine_hello>("loom.engine_hello");
  cfg.add_message_type<instance_stats>("loom.instance_stats");
  cfg.add_message_type<requests_finished>("loom.requests_finished");
  cfg.add_message_type<std::vector<request_done>>("loom.requests_done");
  cfg.add_message_type<gen_command>("loom.gen_command");
  cfg.add_message_type<command_ack>("loom.command_ack");
  cfg.add_message_type<parallel_config>("loom.parallel_config");
  cfg.add_message_type<step_batch>("loom.step_batch");
  cfg.add_message_type<step_placement>("loom.step_placement");
  cfg.add_message_type<step_outcome>("loom.step_outcome");
  cfg.add_message_type<gen_record>("loom.gen_record");
  cfg.add_message_type<gen_status>("loom.gen_status");
  cfg.add_message_type<fabric_stage>("loom.fabric_stage");
  cfg.add_message_type<primitive>("loom.primitive");
  cfg.add_message_type<window_kind>("loom.window_kind");
  cfg.add_message_type<fabric_intent>("loom.fabric_intent");
  cfg.add_message_type<commit_window>("loom.commit_window");
  cfg.add_message_type<fabric_decision>("loom.fabric_decision");
  cfg.add_message_type<fabric_plan_status>("loom.fabric_plan_status");
  cfg.add_message_type<std::vector<fabric_plan_status>>("loom.fabric_plan_statuses");
  cfg.add_message_type<opus_job_status>("loom.opus_job_status");
  cfg.add_message_type<std::vector<opus_job_status>>("loom.opus_job_statuses");
  cfg.add_message_type<fabric_listing>("loom.fabric_listing");
  cfg.add_message_type<std::vector<std::string>>("loom.strings");
  cfg.add_message_type<circuit_layout>("loom.circuit_layout");
  cfg.add_message_type<opus_job>("loom.opus_job");
  cfg.add_message_type<expert_load>("loom.expert_load");
  cfg.add_message_type<opus_registration>("loom.opus_registration");
  cfg.add_message_type<wire_frame>("loom.wire_frame");
  cfg.add_message_type<std::vector<wire_frame>>("loom.wire_frames");
  cfg.add_message_type<topo_write>("loom.topo_write");
  cfg.add_message_type<topo_ack>("loom.topo_ack");
  cfg.add_error_category(error_category(), [](uint8_t code, caf::atom_value, const caf::message& ctx) {
    return render_loom_error(code, ctx);
  });
}

} // namespace loom

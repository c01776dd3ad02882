#pragma once
// Forward declarations of every message type, so that protocol/actors.hpp names the whole
// protocol without pulling in any component's definitions. A source that sends or receives
// these messages includes protocol/inspect.hpp (the definitions and their inspect()).

#include <cstdint>

namespace loom {

// types/common.hpp
enum class worker_role : uint8_t;
struct cross_connect;
struct xc_diff;
struct apply_report;
struct driver_health;
struct ocs_fault;
enum class ocs_request_kind : uint8_t;
struct ocs_request;
struct ocs_reply;

// types/store.hpp
enum class record_kind : uint8_t;
struct record_write;
struct write_batch;
struct stored_record;

// types/scheduler.hpp
enum class phase_kind : uint8_t;
enum class job_state : uint8_t;
struct rl_job;
struct group_member;
struct phase_grant;
struct gpu_resize;
struct job_profile;
struct node_devices;
struct placement_reply;
struct job_progress;
struct node_report;
struct node_outcome;
struct member_joined;
struct member_status;
struct job_status;
struct group_status;
struct scheduler_census;
struct iteration_record;
struct cluster_record;

// types/generation.hpp
struct parallel_config;
struct gen_snapshot;
struct gen_decision;
struct gen_worker;
struct migration;
struct engine_hello;
struct instance_stats;
struct request_done;
struct requests_finished;
struct gen_command;
struct command_ack;
struct step_batch;
struct step_placement;
struct step_outcome;
struct gen_record;
struct gen_status;

// types/fabric.hpp
struct fabric_intent;
struct commit_window;
struct fabric_decision;
struct fabric_plan_status;
struct fabric_listing;
struct opus_job_status;
struct circuit_layout;
struct expert_load;
struct opus_trace;
struct opus_phase;
struct opus_job;
struct opus_registration;
struct topo_write;
struct topo_ack;

// types/gateway.hpp
struct wire_frame;

} // namespace loom

#pragma once
// What the operator's commands print: the service's answers as tables (or key: value lines
// for one job), or JSON with --json.

#include "app/admin.hpp"
#include "loom.pb.h"

namespace loom {

/// Prints the reply to an admin request; returns the exit code (a rejected job is 1).
int show(const admin_request& req, const v1::Envelope& reply);

} // namespace loom

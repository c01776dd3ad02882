// The headers every actor-layer translation unit parses (CAF's above all), precompiled once
// per library: an actor TU spent a quarter of its compile time parsing them again. Only the
// layers that may use CAF (actors, edges, replay, app) take it; types and cores stay CAF-free
// (scripts/check_layers.py). Not the tests: each is one TU, and its own precompiled header
// would cost more than it saves.
#pragma once

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

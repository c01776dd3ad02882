#pragma once
// The one place Boost.Asio is included. Boost 1.74's Asio uses std::exchange without including
// <utility> (fixed in later Boost), which breaks under GCC 12 in C++20 mode.
#include <utility>

#include <boost/asio.hpp>

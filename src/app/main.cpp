// loom: the control plane for disaggregated RL post-training clusters.

#include <CLI/CLI.hpp>

#include "app/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Loom: control plane for disaggregated RL post-training clusters.\n"
               "Packs RL jobs into co-execution groups (WEAVE), plans generation parallelism\n"
               "(OrchestrRL) and reshapes optical fabrics (RFabric, mFabric, Opus)."};
  app.set_version_flag("--version", "loom " LOOM_VERSION);
  app.require_subcommand(1);
  auto commands = loom::loom_subcommands();
  for (auto& c : commands)
    c->add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error (an unknown option, a missing file) is 2.
    return app.exit(e) == 0 ? 0 : loom::exit_config_error;
  }
  for (auto& c : commands)
    if (auto code = c->run_if_given())
      return *code;
  return 0;
}

# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_tpuport_global_optspecs
    string join \n h/help V/version
end

function __fish_tpuport_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_tpuport_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_tpuport_using_subcommand
    set -l cmd (__fish_tpuport_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c tpuport -n "__fish_tpuport_needs_command" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_needs_command" -s V -l version -d 'Print version'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "migrate" -d 'Rewrite CUDA/NCCL code for TorchTPU; report what cannot be rewritten mechanically'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "rule" -d 'Explain a rule (its message, advice, fix class and example), or list them all'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "test-rules" -d 'Check your own rule files against their fixtures: every rule in DIR/*.toml flags its fixture (DIR/tests/ID.py), leaves the near misses after its `# OK` line alone, migrates it to code that parses, idempotently, and to DIR/tests/ID.fixed.py where that exists'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "run" -d 'Run a script under TorchTPU (a TPU, or TorchTPU itself on XLA:CPU; else the sim or the host) and stream what happens in it'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "top" -d 'Show the live dashboard for an events file (or a folder of per-rank files) written by a job started elsewhere, following it as it grows'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "report" -d 'Render charts (SVG and PNG) and a Markdown summary from one events file, or two to compare (A/B, e.g. strict vs defer-fuse)'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "numerics" -d 'Will the TPU\'s numbers match? Run a script\'s first steps in float32 and with TPU matmul precision emulated (sim target), and compare the loss per step and the parameters'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "check" -d 'Is this training script ready for a TPU? Ports a copy of its folder, runs the original on this machine, the port there too and the port on a TPU target (same seeds and arguments), and answers per section: original machine (the port computes the original\'s losses bit for bit where it ran, and prints the same), port, run, numerics (loss per step, first diverging layer), ops a TPU lacks, compiles and syncs, fit on v5e/v5p/v6e/v7x. The user\'s files are not touched'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "doctor" -d 'Is this machine and Python environment set up for TorchTPU? Python, torch\'s version and build, torch_tpu and libtpu, the TPU and whether another process holds it, ignored or obsolete variables, the compilation cache. Exit code 1 when a check fails'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "tune" -d 'Which TorchTPU setting runs this script best? Its first steps under each eager mode (and with --precision each matmul precision), median step time, peak memory, compiles and host syncs side by side, and a recommendation with the numbers behind it'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "completions" -d 'Print a shell completion script: `tpuport completions bash > ~/.local/share/bash-completion/completions/tpuport` (zsh: a file `_tpuport` on $fpath; fish: ~/.config/fish/completions/tpuport.fish)'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "man" -d 'Write the man pages (tpuport.1 and one per command, tpuport-migrate.1, ...) into a folder'
complete -c tpuport -n "__fish_tpuport_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l to -d 'Which machine the fixes write for. `portable` (the default): the program keeps doing what it did on its CUDA machine and is right on a TPU too (`torch.accelerator. current_accelerator()`, the accelerator\'s default backend, comparisons extended to the TPU). `tpu`: TorchTPU\'s literal names (`"tpu"`, `"tpu_dist"`, `.to("tpu")`), for code that leaves CUDA behind' -r -f -a "portable\t''
tpu\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l config -d 'The configuration file (`pyproject.toml` with `[tool.tpuport]`, or `tpuport.toml`) instead of the one found above the first path' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l select -d 'Only run these rules: ids or prefixes, comma separated (e.g. `DEV,CUD004`)' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l ignore -d 'Skip these rules: ids or prefixes, comma separated' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l rules -d 'Extra rule folder(s) holding *.toml rule files (see docs/writing-rules.md)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l max-file-size -d 'Largest file to read, in megabytes [default: 8, or `max-file-size` in the configuration]' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l min-torch -d 'The oldest torch the project runs (`2.11`), over its pin files: where nothing says, the portable forms keep the original beside them for a torch without `torch.accelerator`' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l output-format -d 'Output format for findings' -r -f -a "text\t'Findings with the source line and advice, then the diff'
json\t'A JSON array of findings with byte-offset edits'
sarif\t'A SARIF 2.1.0 log (code scanning), with the fixes as replacements'
github\t'GitHub Actions annotations (`::warning file=...::message`), one line per finding'"
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -s j -l threads -d 'Worker threads (default: one per core)' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -s w -l write -d 'Write the fixes back to the files (atomically; permissions kept)'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l check -d 'Report only; exit 1 if anything would change or a diagnostic is reported'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l diff -d 'Print only the unified diff (a patch for `git apply`), no diagnostics'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -s i -l interactive -d 'Review each fix `--write` would apply on a screen (accept, skip, edit), then write the accepted ones (atomically). Needs a terminal'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l unsafe-fixes -d 'Also apply fixes that may change behaviour (review the diff!)'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l no-unsafe-fixes -d 'Do not apply unsafe fixes, whatever the configuration file says'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l isolated -d 'Read no configuration file: only the command line counts'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l no-ignore -d 'Do not honour .gitignore/.ignore files or skip hidden files'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l exit-zero -d 'Exit 0 even when there are findings (errors still exit 2)'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -s q -l quiet -d 'Print one line per finding and no summary'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l statistics -d 'Print counts per rule and per family (found, fixed, left) instead of findings and diffs'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -l watch -d 'Check again whenever a Python file under the paths changes (debounced), until Ctrl-C; findings only: it never writes'
complete -c tpuport -n "__fish_tpuport_using_subcommand migrate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tpuport -n "__fish_tpuport_using_subcommand rule" -l rules -d 'Extra rule folder(s) to include' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand rule" -l all -d 'List every rule, one per line'
complete -c tpuport -n "__fish_tpuport_using_subcommand rule" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_using_subcommand test-rules" -l update -d 'Write each fixture\'s safe migration to ID.fixed.py (review the diff, then commit it)'
complete -c tpuport -n "__fish_tpuport_using_subcommand test-rules" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -s m -l module -d 'Run a module as `python -m NAME` does (e.g. `-m torch.tpu.distributed` on the sim target); every positional argument goes to it' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l target -d 'Where to run: a real TPU; TorchTPU itself on this CPU (xla-cpu); the sim; or the host as written. auto: a TPU if attached, else xla-cpu where installed, else the sim (the run says which and why)' -r -f -a "auto\t'A TPU if one is attached (PCI/VFIO), else xla-cpu where it is installed and serves the environment (Linux x86_64, torch 2.11–2.15), else the sim'
tpu\t'A real TPU, with the TorchTPU installed in the script\'s environment'
xla-cpu\t'TorchTPU 0.2.0 itself, run on this CPU: its device, op coverage, errors, compiler and compile cache, through a CPU PJRT plugin in libtpu\'s place (scripts/bootstrap-xla-cpu installs it). One process; no TPU kernels (Mosaic), no TPU speed'
sim\t'A Python emulation of TorchTPU over the host (any OS, any torch): "tpu" maps to the host'
host\t'The script as written, on this machine'"
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l mode -d 'TorchTPU eager mode: strict (op by op, async), debug (synchronous), defer-fuse (fused)' -r -f -a "strict\t''
debug\t''
defer-fuse\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l precision -d 'Float32 matmul precision: default (bf16 1-pass, TorchTPU\'s "medium"), high (3-pass), highest (6-pass)' -r -f -a "default\t''
high\t''
highest\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l cache-dir -d 'Persistent (tier-3) compilation cache root' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l cache-name -d 'Host-local (tier-2) compilation cache name' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l chip -d 'TPU generation to simulate (HBM capacity, device name); on a TPU the real one is used' -r -f -a "v4\t''
v5e\t''
v5p\t''
v6e\t''
v7x\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l python -d 'Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l events -d 'Events file (JSON lines; default: runs/<time>-<script>-<pid>.jsonl)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l timeout -d 'Interrupt the script after this many seconds (exit 124)' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l max-steps -d 'End the script cleanly (exit 0) after this many training steps (optimizer steps, or `tpuport.step()` markers), to try a long training script quickly' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l nproc -d 'Run N processes (one per TPU device, as TorchTPU does) through the environment\'s torchrun, each instrumented, writing rank<N>.jsonl in one run folder (--events names the folder); at the end, the ranks side by side: who died and how, and the straggler' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l nnodes -d 'With --nproc: hosts in the job (multi-host), this host\'s rank, and the rendezvous address (passed to torchrun)' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l node-rank -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l master-addr -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l master-port -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l hbm-track -d 'sim: how HBM is tracked on a CPU host: sampled (the first steps and one in 25), full (every op; exact, slower), off' -r -f -a "sampled\t''
full\t''
off\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l hbm -d 'sim: HBM per device instead of the chip\'s (e.g. 512MiB, 8GiB), to see where a model stops fitting' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l excess-precision -d 'Allow XLA to keep higher precision than asked (torch.tpu.allow_excess_precision), set before the first compile'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l debug-checks -d 'TorchTPU\'s expensive correctness checks (e.g. index bounds of take())'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l cpu-fallback -d 'Run the ATen ops TorchTPU 0.2.0 lacks on the CPU instead of failing (TorchTPU\'s enable_cpu_fallback): each is reported once and listed at the end'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l cuda-on-cpu -d 'host: where torch sees no CUDA, run the script\'s CUDA devices (`"cuda"`, `.cuda()`, `torch.cuda.*`, autocast, GradScaler, NCCL) on the CPU, so a CUDA script runs as written'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l watch -d 'Run the script again whenever it or a Python file in its folder changes (a change while it runs stops it first); the dashboard restarts in place. Leave the dashboard, or Ctrl-C, to stop watching'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l no-breakdown -d 'Do not time each step\'s phases (data, forward, backward, optimizer, host syncs): the module, autograd, optimizer and DataLoader hooks that measure them stay out'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l losses -d 'Record each step\'s loss (the scalar tensor `.backward()` is called on; under a GradScaler, the loss it scaled) in the step events, with torch, random and numpy seeded 0 before the script: runs on two targets then compare step by step (what `check` and `numerics` do; bench/realcode.sh uses it)'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l no-tui -d 'No dashboard: one line per step and a summary at the end'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l subprocess -d 'Run the agent as `python -m tpuport_agent` even where CPython could be embedded'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -l strict-hbm -d 'sim: raise torch.OutOfMemoryError when the tensors live on the simulated TPU pass its HBM (implies --hbm-track full)'
complete -c tpuport -n "__fish_tpuport_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tpuport -n "__fish_tpuport_using_subcommand top" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_using_subcommand report" -s o -l output -d 'Folder for the report (created if missing; files in it are replaced atomically)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand report" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_using_subcommand numerics" -l steps -d 'Optimizer steps to run in each of the two runs' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand numerics" -l precision -d 'The TPU precision to emulate against float32' -r -f -a "default\t''
high\t''
highest\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand numerics" -l chip -d 'TPU generation to simulate' -r -f -a "v4\t''
v5e\t''
v5p\t''
v6e\t''
v7x\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand numerics" -l target -d 'Where both runs go: auto (xla-cpu where installed, else the sim), xla-cpu or sim' -r -f -a "auto\t'A TPU if one is attached (PCI/VFIO), else xla-cpu where it is installed and serves the environment (Linux x86_64, torch 2.11–2.15), else the sim'
tpu\t'A real TPU, with the TorchTPU installed in the script\'s environment'
xla-cpu\t'TorchTPU 0.2.0 itself, run on this CPU: its device, op coverage, errors, compiler and compile cache, through a CPU PJRT plugin in libtpu\'s place (scripts/bootstrap-xla-cpu installs it). One process; no TPU kernels (Mosaic), no TPU speed'
sim\t'A Python emulation of TorchTPU over the host (any OS, any torch): "tpu" maps to the host'
host\t'The script as written, on this machine'"
complete -c tpuport -n "__fish_tpuport_using_subcommand numerics" -l python -d 'Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand numerics" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -s o -l output -d 'Report folder: report.md, report.html, report.json, charts, the port\'s diff, the three events files and the copies (default: the terminal summary only)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -l steps -d 'Training steps in each run' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -l rtol -d 'Relative tolerance at which the port\'s losses and layer outputs count as parting from the original\'s (TPU default precision is bf16-class: about 1e-3 per layer)' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -l output-format -d '`json`: the whole answer as JSON on stdout (for CI)' -r -f -a "text\t''
json\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -l timeout -d 'Seconds each of the three runs may take' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -l target -d 'Where the port runs: auto (a TPU if attached, else xla-cpu where installed, else the sim), tpu, xla-cpu or sim. The original, and the port beside it, always run on the host' -r -f -a "auto\t'A TPU if one is attached (PCI/VFIO), else xla-cpu where it is installed and serves the environment (Linux x86_64, torch 2.11–2.15), else the sim'
tpu\t'A real TPU, with the TorchTPU installed in the script\'s environment'
xla-cpu\t'TorchTPU 0.2.0 itself, run on this CPU: its device, op coverage, errors, compiler and compile cache, through a CPU PJRT plugin in libtpu\'s place (scripts/bootstrap-xla-cpu installs it). One process; no TPU kernels (Mosaic), no TPU speed'
sim\t'A Python emulation of TorchTPU over the host (any OS, any torch): "tpu" maps to the host'
host\t'The script as written, on this machine'"
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -l python -d 'Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tpuport -n "__fish_tpuport_using_subcommand doctor" -l python -d 'Python interpreter or venv to check (default: $VIRTUAL_ENV, else the project venv, else python3)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand doctor" -l output-format -d '`json`: the checks as a JSON array' -r -f -a "text\t''
json\t''"
complete -c tpuport -n "__fish_tpuport_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_using_subcommand tune" -l steps -d 'Training steps per setting' -r
complete -c tpuport -n "__fish_tpuport_using_subcommand tune" -l target -d 'Where to run (a TPU if attached, else xla-cpu where installed, else the sim target)' -r -f -a "auto\t'A TPU if one is attached (PCI/VFIO), else xla-cpu where it is installed and serves the environment (Linux x86_64, torch 2.11–2.15), else the sim'
tpu\t'A real TPU, with the TorchTPU installed in the script\'s environment'
xla-cpu\t'TorchTPU 0.2.0 itself, run on this CPU: its device, op coverage, errors, compiler and compile cache, through a CPU PJRT plugin in libtpu\'s place (scripts/bootstrap-xla-cpu installs it). One process; no TPU kernels (Mosaic), no TPU speed'
sim\t'A Python emulation of TorchTPU over the host (any OS, any torch): "tpu" maps to the host'
host\t'The script as written, on this machine'"
complete -c tpuport -n "__fish_tpuport_using_subcommand tune" -s o -l output -d 'Folder for the runs\' events files (default: runs/<time>-tune-<script>/)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand tune" -l python -d 'Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand tune" -l precision -d 'Also try each float32 matmul precision (default, high, highest) under each mode'
complete -c tpuport -n "__fish_tpuport_using_subcommand tune" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tpuport -n "__fish_tpuport_using_subcommand completions" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_using_subcommand man" -s o -l output -d 'The folder to write the pages into (created if needed)' -r -F
complete -c tpuport -n "__fish_tpuport_using_subcommand man" -s h -l help -d 'Print help'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "migrate" -d 'Rewrite CUDA/NCCL code for TorchTPU; report what cannot be rewritten mechanically'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "rule" -d 'Explain a rule (its message, advice, fix class and example), or list them all'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "test-rules" -d 'Check your own rule files against their fixtures: every rule in DIR/*.toml flags its fixture (DIR/tests/ID.py), leaves the near misses after its `# OK` line alone, migrates it to code that parses, idempotently, and to DIR/tests/ID.fixed.py where that exists'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "run" -d 'Run a script under TorchTPU (a TPU, or TorchTPU itself on XLA:CPU; else the sim or the host) and stream what happens in it'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "top" -d 'Show the live dashboard for an events file (or a folder of per-rank files) written by a job started elsewhere, following it as it grows'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "report" -d 'Render charts (SVG and PNG) and a Markdown summary from one events file, or two to compare (A/B, e.g. strict vs defer-fuse)'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "numerics" -d 'Will the TPU\'s numbers match? Run a script\'s first steps in float32 and with TPU matmul precision emulated (sim target), and compare the loss per step and the parameters'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "check" -d 'Is this training script ready for a TPU? Ports a copy of its folder, runs the original on this machine, the port there too and the port on a TPU target (same seeds and arguments), and answers per section: original machine (the port computes the original\'s losses bit for bit where it ran, and prints the same), port, run, numerics (loss per step, first diverging layer), ops a TPU lacks, compiles and syncs, fit on v5e/v5p/v6e/v7x. The user\'s files are not touched'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "doctor" -d 'Is this machine and Python environment set up for TorchTPU? Python, torch\'s version and build, torch_tpu and libtpu, the TPU and whether another process holds it, ignored or obsolete variables, the compilation cache. Exit code 1 when a check fails'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "tune" -d 'Which TorchTPU setting runs this script best? Its first steps under each eager mode (and with --precision each matmul precision), median step time, peak memory, compiles and host syncs side by side, and a recommendation with the numbers behind it'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "completions" -d 'Print a shell completion script: `tpuport completions bash > ~/.local/share/bash-completion/completions/tpuport` (zsh: a file `_tpuport` on $fpath; fish: ~/.config/fish/completions/tpuport.fish)'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "man" -d 'Write the man pages (tpuport.1 and one per command, tpuport-migrate.1, ...) into a folder'
complete -c tpuport -n "__fish_tpuport_using_subcommand help; and not __fish_seen_subcommand_from migrate rule test-rules run top report numerics check doctor tune completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'

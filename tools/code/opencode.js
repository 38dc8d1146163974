// Run by bun inside a generation job's sandbox (opencode.py), with forward.js preloaded:
// that opened the ways out of its loopback-only network namespace (the model relay, and
// the egress proxy when the network is on). This starts OpenCode itself, with the prompt
// on stdin and its JSON events on stdout. When it ends, so does this process (and bwrap
// with it, ending whatever OpenCode left running).
const env = { ...process.env };
const command = JSON.parse(env.SIDEKICK_OPENCODE_ARGV);
for (const name of Object.keys(env)) {
  if (name.startsWith("SIDEKICK_")) delete env[name];
}

const child = Bun.spawn(command, { env, stdin: "inherit", stdout: "inherit", stderr: "inherit" });
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => child.kill(signal));
}
process.exit(await child.exited);

// Run by bun inside a generation job's sandbox (opencode_job.py): its network namespace
// holds only loopback, so this opens the two ways out before starting OpenCode.
// - 127.0.0.1:<model port> -> the model relay's Unix socket (relay.py, in the bot), which
//   adds the API key: OpenCode's config names this endpoint and no key.
// - 127.0.0.1:3128 -> the egress proxy's socket (egress.py), when the network is on;
//   HTTP_PROXY points there, as for code runs.
// Then OpenCode itself, with the prompt on stdin and its JSON events on stdout. When it
// ends, so does this process (and bwrap with it, ending whatever OpenCode left running).
import net from "node:net";

const env = { ...process.env };
const relaySocket = env.SIDEKICK_MODEL_SOCKET;
const egressSocket = env.SIDEKICK_EGRESS_SOCKET;
const modelPort = Number(env.SIDEKICK_MODEL_PORT);
const command = JSON.parse(env.SIDEKICK_OPENCODE_ARGV);
for (const name of Object.keys(env)) {
  if (name.startsWith("SIDEKICK_")) delete env[name];
}

function forward(port, socket) {
  const server = net.createServer((client) => {
    const upstream = net.connect(socket);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

await forward(modelPort, relaySocket);
if (egressSocket) await forward(3128, egressSocket);

const child = Bun.spawn(command, { env, stdin: "inherit", stdout: "inherit", stderr: "inherit" });
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => child.kill(signal));
}
process.exit(await child.exited);

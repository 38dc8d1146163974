// Preloaded into bun in a sandbox whose network namespace holds only loopback: it opens
// the ways out, each a loopback port passed on to one of the bot's Unix sockets (bound into
// the sandbox), for whichever of them the run's environment names.
// - 127.0.0.1:3128 -> the egress proxy's socket (egress.py), which applies the address
//   rule: code runs and OpenCode jobs with the network on; HTTP_PROXY / HTTPS_PROXY
//   point there.
// - 127.0.0.1:<SIDEKICK_MODEL_PORT> -> the model relay's socket (relay.py), which adds the
//   API key: OpenCode jobs (opencode.js), whose config names this endpoint and no key.
// The listeners are unref'd, so they do not keep a finished program alive.
import net from "node:net";

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

const env = process.env;
const ways = [
  [3128, env.SIDEKICK_EGRESS_SOCKET],
  [Number(env.SIDEKICK_MODEL_PORT), env.SIDEKICK_MODEL_SOCKET],
];
for (const name of ["SIDEKICK_EGRESS_SOCKET", "SIDEKICK_MODEL_PORT", "SIDEKICK_MODEL_SOCKET"]) {
  delete env[name];
}
for (const [port, socket] of ways) {
  if (socket) (await forward(port, socket)).unref();
}

// Preloaded into bun when the run's network goes through the bot's egress proxy (egress.py).
// The run's network namespace holds only loopback: this passes each connection to
// 127.0.0.1:3128 on to the proxy's Unix socket, which applies the address rule; bun's
// fetch comes here through HTTP_PROXY / HTTPS_PROXY. The listener is unref'd, so it does
// not keep a finished program alive.
import net from "node:net";

const socket = process.env.SIDEKICK_EGRESS_SOCKET || "/run/sidekick/egress.sock";
delete process.env.SIDEKICK_EGRESS_SOCKET;
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
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(3128, "127.0.0.1", resolve);
});
server.unref();

import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { Ports } from "../components/Ports";
import { Client } from "../api/client";
import type { Port } from "../api/types";
import type { Transport } from "../api/transport";

// A transport that keeps the session's forwards in memory, as the engine
// does: POST adds one on a new host port, DELETE removes it.
function fake(initial: Port[]) {
  let ports = [...initial];
  const calls: { method: string; path: string; body?: unknown }[] = [];
  const t: Transport = {
    kind: "browser",
    async request<T>(method: string, path: string, body?: unknown) {
      calls.push({ method, path, body });
      if (method === "POST") {
        const port = (body as { port: number }).port;
        const p: Port = { session: "s1", port, listen: "127.0.0.1:40001", url: "http://127.0.0.1:40001/" };
        ports.push(p);
        return p as T;
      }
      if (method === "DELETE") {
        const port = Number(path.split("/").pop());
        ports = ports.filter((p) => p.port !== port);
        return undefined as T;
      }
      return ports as T;
    },
    async stream() {},
    watch: () => ({ ended: new Promise<void>(() => {}), close() {} }),
    terminal: () => ({ write() {}, resize() {}, close() {} }),
    pickFolder: async () => null,
  };
  return { client: new Client(t), calls };
}

afterEach(cleanup);

describe("Ports", () => {
  it("lists forwards with an Open link (with the token for one with auth), forwards a port and stops one", async () => {
    const { client, calls } = fake([
      { session: "s1", port: 8000, listen: "0.0.0.0:8080", url: "http://192.0.2.5:8080/", auth: "bearer", token: "abc" },
    ]);
    render(
      <Ports
        client={client}
        session="s1"
        onError={(e) => {
          throw e;
        }}
      />,
    );
    const open = await screen.findByRole("link", { name: "Open" });
    expect(open.getAttribute("href")).toBe("http://192.0.2.5:8080/?token=abc");

    const forward = screen.getByRole("button", { name: "Forward" });
    fireEvent.change(screen.getByLabelText("port"), { target: { value: "99999" } });
    expect((forward as HTMLButtonElement).disabled).toBe(true);
    fireEvent.change(screen.getByLabelText("port"), { target: { value: "5173" } });
    fireEvent.click(forward);
    await waitFor(() => expect(screen.getAllByRole("link", { name: "Open" })).toHaveLength(2));
    expect(calls).toContainEqual({ method: "POST", path: "/sessions/s1/ports", body: { port: 5173 } });
    expect(screen.getByText("http://127.0.0.1:40001/")).toBeTruthy();

    fireEvent.click(screen.getAllByRole("button", { name: "Stop" })[0]);
    await waitFor(() => expect(screen.getAllByRole("link", { name: "Open" })).toHaveLength(1));
    expect(calls.some((c) => c.method === "DELETE" && c.path === "/sessions/s1/ports/8000")).toBe(true);
  });
});

import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { Ports } from "../components/Ports";
import { Client } from "../api/client";
import type { ListeningPort, Port } from "../api/types";
import type { Transport } from "../api/transport";

// A transport that keeps the session's forwards in memory, as the engine
// does: POST adds one on a new host port, DELETE removes it; the ports
// the session listens on are listed less the forwarded ones (null: the
// engine refuses to read them, as for a stopped session).
function fake(initial: Port[], listening: ListeningPort[] | null = []) {
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
      if (path.endsWith("/ports/listening")) {
        if (listening === null) throw new Error("session s1 is stopped");
        return listening.filter((l) => !ports.some((p) => p.port === l.port)) as T;
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

  it("lists the ports the session listens on with Publish, which forwards one; basic auth opens without a token", async () => {
    const { client, calls } = fake(
      [{ session: "s1", port: 8000, listen: "0.0.0.0:8080", url: "http://192.0.2.5:8080/", auth: "basic", user: "me", token: "pw" }],
      [
        { port: 8000, addresses: ["0.0.0.0"] },
        { port: 8123, addresses: ["0.0.0.0", "::"] },
      ],
    );
    render(
      <Ports
        client={client}
        session="s1"
        onError={(e) => {
          throw e;
        }}
      />,
    );
    const table = await screen.findByRole("table", { name: "listening ports" });
    expect(within(table).getByText("0.0.0.0, ::")).toBeTruthy();
    expect(within(table).queryByText("8000")).toBeNull(); // forwarded already
    expect(screen.getByRole("link", { name: "Open" }).getAttribute("href")).toBe("http://192.0.2.5:8080/");
    expect(screen.getByText("basic: me / pw")).toBeTruthy();

    fireEvent.click(within(table).getByRole("button", { name: "Publish" }));
    await waitFor(() => expect(screen.getAllByRole("link", { name: "Open" })).toHaveLength(2));
    expect(calls).toContainEqual({ method: "POST", path: "/sessions/s1/ports", body: { port: 8123 } });
    expect(screen.queryByRole("table", { name: "listening ports" })).toBeNull();
    expect(screen.getByText("The session listens on no other TCP port.")).toBeTruthy();
  });

  it("shows no listening ports, and no error, when the engine cannot read them", async () => {
    const { client } = fake([], null);
    render(
      <Ports
        client={client}
        session="s1"
        onError={(e) => {
          throw e;
        }}
      />,
    );
    expect(await screen.findByText("The session listens on no other TCP port.")).toBeTruthy();
    expect(screen.getByText("No ports of this session are forwarded.")).toBeTruthy();
  });
});

// @vitest-environment node
// lib/names.ts keeps the rules of the engine's names package: both are
// tested against names/testdata/quote.json (written by `go test ./names
// -update`), so the interface and the CLI show a name the same way.
import { describe, expect, it } from "vitest";
import { kinds, quote, quoteBytes, shown } from "../lib/names";

// Read with node's fs: the golden lies outside the frontend's root, which
// vite does not serve. (Named through a variable: the build has no node
// types.)
const fsModule = "node:fs";
const fs = (await import(/* @vite-ignore */ fsModule)) as { readFileSync(file: URL, enc: "utf8"): string };
const goldenText = fs.readFileSync(new URL("../../../names/testdata/quote.json", import.meta.url), "utf8");

interface Golden {
  name?: string;
  hex?: string;
  quoted: string;
  kinds?: string[];
}

const golden = JSON.parse(goldenText) as Golden[];
const fromHex = (h: string) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));

describe("names", () => {
  it("has the golden's cases", () => {
    expect(golden.length).toBeGreaterThan(40);
  });
  for (const g of golden) {
    const label = g.name !== undefined ? JSON.stringify(g.name) : "0x" + g.hex;
    it(`quotes ${label} as the engine does`, () => {
      const bytes = g.hex !== undefined ? fromHex(g.hex) : new TextEncoder().encode(g.name);
      expect(quoteBytes(bytes)).toBe(g.quoted);
      expect(kinds(bytes)).toEqual(g.kinds ?? []);
      if (g.name !== undefined) {
        expect(quote(g.name)).toBe(g.quoted);
        expect(kinds(g.name)).toEqual(g.kinds ?? []);
      }
    });
  }
  it("marks a name that needed quoting, and reads raw_path", () => {
    expect(shown("src/main.go")).toEqual({ text: "src/main.go", quoted: false });
    expect(shown("uni\u202egnp.exe")).toEqual({ text: '"uni\\u202egnp.exe"', quoted: true });
    expect(shown("bad\ufffd", btoa("bad\xff"))).toEqual({ text: '"bad\\xff"', quoted: true });
  });
});

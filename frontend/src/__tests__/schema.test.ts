// @vitest-environment node
// src/api/schema.d.ts is generated from docs/openapi.yaml (`npm run
// gen:api`): this fails when the spec changed and the types were not made
// again, so the UI never compiles against an API the engine does not
// serve (engine/server's openapi_test.go checks the spec against the
// engine).
import { describe, expect, it } from "vitest";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";
import { format } from "prettier";
import prettierConfig from "../../.prettierrc.json";
import committed from "../api/schema.d.ts?raw";

describe("schema.d.ts", () => {
  it("is what npm run gen:api makes of docs/openapi.yaml", async () => {
    const ast = await openapiTS(new URL("../../../docs/openapi.yaml", import.meta.url));
    const made = await format(COMMENT_HEADER + astToString(ast), { ...prettierConfig, parser: "typescript" });
    expect(made === committed, "src/api/schema.d.ts is out of date with docs/openapi.yaml: run `npm run gen:api` in frontend/").toBe(true);
  }, 30_000);
});

// @vitest-environment node
// src/api/schema.d.ts is generated from docs/openapi.yaml (`npm run
// gen:api`): this fails when the spec changed and the types were not made
// again, so the UI never compiles against an API the engine does not
// serve (engine/server's openapi_test.go checks the spec against the
// engine).
import { describe, expect, it } from "vitest";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";
import { createConfig, lint } from "@redocly/openapi-core";
import { format } from "prettier";
import prettierConfig from "../../.prettierrc.json";
import committed from "../api/schema.d.ts?raw";

const spec = new URL("../../../docs/openapi.yaml", import.meta.url);

describe("docs/openapi.yaml", () => {
  it("is valid OpenAPI 3 by Redocly's recommended rules", async () => {
    const config = await createConfig({
      extends: ["recommended"],
      rules: {
        // Errors are the `default` answer: the error's class gives its status.
        "operation-4xx-response": "off",
        // The project's licence is the repository's, not the API's.
        "info-license": "off",
        // Exec frames and server-sent events carry these; the spec can only
        // name them in words.
        "no-unused-components": "off",
      },
    });
    const problems = await lint({ ref: spec.pathname, config });
    expect(problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  }, 30_000);
});

describe("schema.d.ts", () => {
  it("is what npm run gen:api makes of docs/openapi.yaml", async () => {
    const ast = await openapiTS(spec);
    const made = await format(COMMENT_HEADER + astToString(ast), { ...prettierConfig, parser: "typescript" });
    expect(made === committed, "src/api/schema.d.ts is out of date with docs/openapi.yaml: run `npm run gen:api` in frontend/").toBe(true);
  }, 30_000);
});

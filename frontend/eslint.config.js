// ESLint for the interface (`make lint` runs it with Prettier's check):
// the recommended JavaScript and type-aware TypeScript rules, the rules of
// React hooks, and nothing about layout (that is Prettier's).
import js from "@eslint/js";
import prettier from "eslint-config-prettier";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  reactHooks.configs.flat["recommended-latest"],
  {
    languageOptions: {
      globals: globals.browser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // An event handler may be async: React drops what it returns, and
      // the handlers report their own failures.
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { attributes: false } }],
      // Loading on mount (an effect that calls an async load whose
      // setState comes after an await) is what this rule cannot tell from
      // a synchronous setState.
      "react-hooks/set-state-in-effect": "off",
    },
  },
  {
    files: ["src/__tests__/**"],
    rules: {
      // Fakes implement async interfaces without awaiting, and act(async)
      // is how a test lets React settle.
      "@typescript-eslint/require-await": "off",
    },
  },
  // The build's own configuration is outside the project tsconfig.json
  // describes.
  { files: ["*.js", "*.ts"], extends: [tseslint.configs.disableTypeChecked], languageOptions: { globals: globals.node } },
  prettier,
);

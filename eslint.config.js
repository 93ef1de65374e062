// ESLint for the explorer's ES modules (static/js): `make lint` runs it beside ruff.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["static/js/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.browser },
    rules: {
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "always", { null: "ignore" }], // `x == null` covers a missing field and a null one
      "no-var": "error",
      "prefer-const": "error",
      "no-implicit-globals": "error",
      curly: ["error", "multi-line"],
    },
  },
  { files: ["static/js/early.js"], languageOptions: { sourceType: "script" } },
];

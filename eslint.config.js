// ESLint for the explorer's ES modules (static/js, and each lab kind's lab.js under app/domain/labs/):
// `make lint` runs it beside ruff. The recommended rules catch mistakes; @stylistic's rules hold the format
// (2-space indent, double quotes, semicolons, trailing commas in multi-line literals, 160 columns), and
// `npx eslint --fix static/js app` applies it.
import js from "@eslint/js";
import stylistic from "@stylistic/eslint-plugin";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["static/js/**/*.js", "app/**/*.js"],
    languageOptions: { ecmaVersion: 2023, sourceType: "module", globals: globals.browser },
    plugins: { "@stylistic": stylistic },
    rules: {
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "always", { null: "ignore" }], // `x == null` covers a missing field and a null one
      "no-var": "error",
      "prefer-const": "error",
      "no-implicit-globals": "error",
      curly: ["error", "multi-line"],
      "@stylistic/indent": ["error", 2, { SwitchCase: 1, flatTernaryExpressions: true }],
      "@stylistic/quotes": ["error", "double", { avoidEscape: true }],
      "@stylistic/semi": ["error", "always"],
      "@stylistic/comma-dangle": ["error", "always-multiline"],
      "@stylistic/max-len": ["error", { code: 160, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreComments: false }],
      "@stylistic/no-trailing-spaces": "error",
      "@stylistic/eol-last": "error",
      "@stylistic/arrow-parens": ["error", "always"],
      "@stylistic/space-before-blocks": "error",
      "@stylistic/keyword-spacing": "error",
      "@stylistic/no-multiple-empty-lines": ["error", { max: 1 }],
    },
  },
  { files: ["static/js/early.js"], languageOptions: { sourceType: "script" } },
];

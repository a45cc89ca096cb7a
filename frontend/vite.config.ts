import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// The same build is embedded in the desktop app (Wails) and served by the
// engine for a browser (`airlock ui`): relative asset paths work in both.
export default defineConfig({
  plugins: [react()],
  base: "./",
  build: { outDir: "dist", emptyOutDir: true, chunkSizeWarningLimit: 2000 },
  test: { environment: "jsdom", globals: true },
});

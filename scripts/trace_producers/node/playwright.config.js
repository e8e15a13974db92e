// @playwright/test configuration for one recorded demo episode (job file in $TRACE_JOB).
const fs = require('fs');
const { defineConfig } = require('@playwright/test');

const job = JSON.parse(fs.readFileSync(process.env.TRACE_JOB, 'utf8'));

module.exports = defineConfig({
  testDir: __dirname,
  testMatch: 'episode.spec.js',
  outputDir: job.output_dir,
  workers: 1,
  retries: 0,
  timeout: 180000,
  reporter: 'line',
  use: {
    trace: { mode: 'on', screenshots: job.screenshots, snapshots: true, sources: false },
    storageState: job.storage_state,
    viewport: { width: 1280, height: 720 },
    launchOptions: { executablePath: job.chromium, args: job.chromium_args },
  },
});

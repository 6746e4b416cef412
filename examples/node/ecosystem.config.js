// PM2: the app in cluster mode with 4 instances, as the incident ran it. Each instance's
// guard knows which one it is (host/pm2:N/pid, from NODE_APP_INSTANCE) and names it in
// every skip the others record.
module.exports = {
  apps: [
    {
      name: "billing",
      script: "app.js",
      cwd: __dirname,
      exec_mode: "cluster",
      instances: 4,
      kill_timeout: 5000,
      env: {
        BATCHGUARD_STORE: process.env.BATCHGUARD_STORE || "postgres://billing@127.0.0.1:5432/billing",
        BILLING_DATABASE_URL: process.env.BILLING_DATABASE_URL || "postgres://billing@127.0.0.1:5432/billing",
      },
    },
  ],
};

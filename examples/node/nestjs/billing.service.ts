// NestJS: a @Cron handler wrapped in batchguard's guard. @nestjs/schedule calls the handler
// with no tick time, so the slot is the latest one at or before the store's clock (early
// ticks within the tick tolerance count as their slot): every replica names the same slot.
import { Injectable, Logger } from "@nestjs/common";
import { Cron } from "@nestjs/schedule";
import { guarded, type Run } from "batchguard";
import { join } from "node:path";
import { Pool } from "pg";
import { settleInvoices } from "../settle";

@Injectable()
export class BillingService {
  private readonly logger = new Logger(BillingService.name);
  private readonly db = new Pool({ connectionString: process.env.BILLING_DATABASE_URL });

  private readonly settle = guarded(
    { manifest: join(__dirname, "..", "billing.batchguard.yaml"), job: "settle-invoices" },
    (run: Run) => settleInvoices(this.db, run),
  );

  @Cron("*/5 * * * *", { name: "settle-invoices", timeZone: "UTC" })
  async settleInvoices(): Promise<void> {
    const result = await this.settle();
    if (result.status === "skipped") this.logger.log(`skipped: ${result.reason}`);
    else if (result.status !== "succeeded") this.logger.error(`${result.status}: ${result.code}`);
  }
}

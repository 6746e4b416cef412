//! `@nestjs/schedule`'s `CronExpression` enum, so `@Cron(CronExpression.EVERY_HOUR)` is read
//! as the expression NestJS hands to the `cron` package. Values as `@nestjs/schedule` 4-6
//! define them (a member not listed is "schedule not static").

pub fn expression(member: &str) -> Option<&'static str> {
    Some(match member {
        "EVERY_SECOND" => "* * * * * *",
        "EVERY_5_SECONDS" => "*/5 * * * * *",
        "EVERY_10_SECONDS" => "*/10 * * * * *",
        "EVERY_30_SECONDS" => "*/30 * * * * *",
        "EVERY_MINUTE" => "*/1 * * * *",
        "EVERY_5_MINUTES" => "*/5 * * * *",
        "EVERY_10_MINUTES" => "*/10 * * * *",
        "EVERY_30_MINUTES" => "*/30 * * * *",
        "EVERY_HOUR" => "0 0-23/1 * * *",
        "EVERY_2_HOURS" => "0 0-23/2 * * *",
        "EVERY_3_HOURS" => "0 0-23/3 * * *",
        "EVERY_4_HOURS" => "0 0-23/4 * * *",
        "EVERY_6_HOURS" => "0 0-23/6 * * *",
        "EVERY_12_HOURS" => "0 0-23/12 * * *",
        "EVERY_DAY_AT_1AM" => "0 01 * * *",
        "EVERY_DAY_AT_2AM" => "0 02 * * *",
        "EVERY_DAY_AT_3AM" => "0 03 * * *",
        "EVERY_DAY_AT_4AM" => "0 04 * * *",
        "EVERY_DAY_AT_5AM" => "0 05 * * *",
        "EVERY_DAY_AT_6AM" => "0 06 * * *",
        "EVERY_DAY_AT_NOON" => "0 12 * * *",
        "EVERY_DAY_AT_MIDNIGHT" => "0 0 * * *",
        "EVERY_WEEK" => "0 0 * * 0",
        "EVERY_WEEKDAY" => "0 0 * * 1-5",
        "EVERY_WEEKEND" => "0 0 * * 6,0",
        "EVERY_1ST_DAY_OF_MONTH_AT_MIDNIGHT" => "0 0 1 * *",
        "EVERY_1ST_DAY_OF_MONTH_AT_NOON" => "0 12 1 * *",
        "EVERY_2ND_HOUR" => "0 */2 * * *",
        "EVERY_QUARTER" => "0 0 1 */3 *",
        "EVERY_6_MONTHS" => "0 0 1 */6 *",
        "EVERY_YEAR" => "0 0 1 0 *",
        _ => return None,
    })
}

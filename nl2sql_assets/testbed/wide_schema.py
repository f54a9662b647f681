"""The wide test bed's business schema: six company datasources, each a set of core tables.

Each core table is one line: its name, then ``column:type`` entries, the first the primary key;
``column>table`` is a foreign key to that table's primary key (an integer). Types: ``i``
integer, ``t`` text, ``m`` money (two decimals), ``f`` a ratio, ``d`` a date. The builder
(``testbed.wide``) widens every datasource to its share of the bed's tables with the tables a
real warehouse grows around its core (staging copies, histories, audits, snapshots, monthly
aggregates, backups, code lists), so retrieval must find ``orders`` among ``stg_orders``,
``orders_history`` and ``agg_orders_monthly``. Names repeat across datasources on purpose
(``customers`` is in ecommerce, support_desk and finance; ``employees`` in hr, with sales reps
in crm and agents in support_desk; ``invoices`` in finance and ecommerce), as they do in a
company's warehouse.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WideSource:
    """One datasource of the bed: its id, engine, what it is about, its sample questions and
    its core tables (the spec lines above)."""

    id: str
    engine: str  # sqlite | duckdb
    description: str
    sample_questions: tuple[str, ...]
    tables: tuple[str, ...]


SOURCES: tuple[WideSource, ...] = (
    WideSource(
        id="crm",
        engine="sqlite",
        description=("The sales CRM: customer accounts and their contacts, leads, the opportunity "
                     "pipeline with quotes and contracts, the sales reps, their territories, "
                     "activities and forecasts, and sales campaigns."),
        sample_questions=(
            "Which opportunities are in the negotiation stage?",
            "How many leads did each sales rep get assigned?",
            "What is the total contract value per account industry?",
            "Which competitors come up most often in our deals?",
        ),
        tables=(
            "accounts: account_id:i, account_name:t, industry:t, annual_revenue:m, employee_count:i, "
            "billing_country:t, owner_rep_id>sales_reps, created_date:d",
            "contacts: contact_id:i, account_id>accounts, first_name:t, last_name:t, email:t, job_title:t",
            "sales_reps: rep_id:i, full_name:t, region:t, quota:m, hire_date:d",
            "leads: lead_id:i, company_name:t, lead_source:t, lead_status:t, lead_score:i, created_date:d, "
            "assigned_rep_id>sales_reps",
            "opportunities: opportunity_id:i, account_id>accounts, stage:t, amount:m, close_date:d, "
            "win_probability:f, owner_rep_id>sales_reps",
            "opportunity_products: opportunity_product_id:i, opportunity_id>opportunities, product_code:t, "
            "quantity:i, unit_price:m",
            "quotes: quote_id:i, opportunity_id>opportunities, quote_date:d, total_amount:m, quote_status:t",
            "contracts: contract_id:i, account_id>accounts, start_date:d, end_date:d, contract_value:m, "
            "renewal_status:t",
            "activities: activity_id:i, rep_id>sales_reps, contact_id>contacts, activity_type:t, "
            "activity_date:d, duration_minutes:i",
            "sales_campaigns: campaign_id:i, campaign_name:t, channel:t, start_date:d, budget:m",
            "campaign_members: member_id:i, campaign_id>sales_campaigns, lead_id>leads, responded:i",
            "territories: territory_id:i, territory_name:t, region:t",
            "rep_territories: assignment_id:i, rep_id>sales_reps, territory_id>territories",
            "competitors: competitor_id:i, competitor_name:t, website:t",
            "opportunity_competitors: link_id:i, opportunity_id>opportunities, competitor_id>competitors",
            "forecasts: forecast_id:i, rep_id>sales_reps, fiscal_quarter:t, forecast_amount:m, "
            "commit_amount:m",
        ),
    ),
    WideSource(
        id="finance",
        engine="duckdb",
        description=("Finance and accounting: the general ledger and its accounts, journal entries, "
                     "accounts receivable (customers, invoices, payments) and payable (vendors, "
                     "bills), budgets per cost center, expenses, fixed assets and tax rates."),
        sample_questions=(
            "What is the balance of each general ledger account?",
            "Which vendor bills are past due?",
            "How much did each cost center spend against its budget?",
            "What is the book value of our fixed assets by category?",
        ),
        tables=(
            "gl_accounts: gl_account_id:i, account_number:t, account_name:t, account_class:t",
            "journal_entries: journal_entry_id:i, entry_date:d, description:t, posted_by:t",
            "journal_lines: journal_line_id:i, journal_entry_id>journal_entries, gl_account_id>gl_accounts, "
            "debit:m, credit:m",
            "customers: customer_id:i, customer_name:t, credit_limit:m, payment_terms_days:i, country:t",
            "invoices: invoice_id:i, customer_id>customers, invoice_date:d, due_date:d, invoice_total:m, "
            "invoice_status:t",
            "payments: payment_id:i, invoice_id>invoices, payment_date:d, amount_paid:m, payment_method:t",
            "vendors: vendor_id:i, vendor_name:t, vendor_category:t, country:t",
            "bills: bill_id:i, vendor_id>vendors, bill_date:d, due_date:d, bill_amount:m, bill_status:t",
            "cost_centers: cost_center_id:i, cost_center_name:t, division:t",
            "budgets: budget_id:i, cost_center_id>cost_centers, fiscal_year:i, budget_amount:m",
            "expenses: expense_id:i, cost_center_id>cost_centers, expense_date:d, expense_category:t, "
            "expense_amount:m",
            "fixed_assets: asset_id:i, asset_name:t, asset_category:t, purchase_date:d, purchase_cost:m, "
            "book_value:m",
            "depreciation_schedule: schedule_id:i, asset_id>fixed_assets, period_month:t, depreciation_amount:m",
            "tax_rates: tax_rate_id:i, jurisdiction:t, tax_rate:f",
            "exchange_rates: exchange_rate_id:i, currency_code:t, rate_date:d, rate_to_usd:f",
            "bank_accounts: bank_account_id:i, bank_name:t, account_currency:t, current_balance:m",
        ),
    ),
    WideSource(
        id="hr",
        engine="sqlite",
        description=("Human resources: employees, departments and positions, salaries and payroll "
                     "runs, time off, performance reviews, training, benefits, and recruiting "
                     "(job openings, candidates, interviews)."),
        sample_questions=(
            "How many employees does each department have?",
            "Who has the most unused vacation days?",
            "What is the average salary per job level?",
            "Which job openings have the most candidates?",
        ),
        tables=(
            "employees: employee_id:i, first_name:t, last_name:t, email:t, department_id>departments, "
            "position_id>positions, hire_date:d, employment_status:t",
            "departments: department_id:i, department_name:t, location:t",
            "positions: position_id:i, position_title:t, job_level:t, min_salary:m, max_salary:m",
            "salaries: salary_id:i, employee_id>employees, effective_date:d, annual_salary:m",
            "payroll_runs: payroll_run_id:i, pay_period_end:d, run_status:t",
            "payslips: payslip_id:i, payroll_run_id>payroll_runs, employee_id>employees, gross_pay:m, "
            "net_pay:m, tax_withheld:m",
            "time_off_requests: request_id:i, employee_id>employees, leave_type:t, start_date:d, days:i, "
            "approval_status:t",
            "vacation_balances: balance_id:i, employee_id>employees, year:i, days_remaining:i",
            "performance_reviews: review_id:i, employee_id>employees, review_year:i, rating:i, reviewer:t",
            "training_courses: course_id:i, course_name:t, provider:t, duration_hours:i",
            "training_enrollments: enrollment_id:i, course_id>training_courses, employee_id>employees, "
            "completed:i",
            "benefit_plans: plan_id:i, plan_name:t, plan_type:t, monthly_cost:m",
            "benefit_enrollments: benefit_enrollment_id:i, plan_id>benefit_plans, employee_id>employees, "
            "enrolled_date:d",
            "job_openings: opening_id:i, position_id>positions, department_id>departments, posted_date:d, "
            "opening_status:t",
            "candidates: candidate_id:i, opening_id>job_openings, full_name:t, source:t, applied_date:d",
            "interviews: interview_id:i, candidate_id>candidates, interview_date:d, interviewer:t, "
            "outcome:t",
        ),
    ),
    WideSource(
        id="supply_chain",
        engine="duckdb",
        description=("Supply chain and logistics: warehouses and their stock, items with reorder "
                     "points, suppliers and purchase orders, inbound receipts, outbound shipments "
                     "by carrier, stock transfers and cycle counts."),
        sample_questions=(
            "Which items are below their reorder point?",
            "How many shipments did each carrier deliver late?",
            "What is the total value of open purchase orders per supplier?",
            "How much stock does each warehouse hold?",
        ),
        tables=(
            "warehouses: warehouse_id:i, warehouse_name:t, city:t, capacity_pallets:i",
            "items: item_id:i, sku:t, item_name:t, item_category:t, unit_cost:m, reorder_point:i",
            "inventory_levels: inventory_id:i, warehouse_id>warehouses, item_id>items, quantity_on_hand:i, "
            "last_counted:d",
            "suppliers: supplier_id:i, supplier_name:t, country:t, lead_time_days:i, rating:i",
            "purchase_orders: purchase_order_id:i, supplier_id>suppliers, order_date:d, expected_date:d, "
            "po_status:t",
            "purchase_order_lines: po_line_id:i, purchase_order_id>purchase_orders, item_id>items, "
            "quantity_ordered:i, unit_cost:m",
            "receipts: receipt_id:i, purchase_order_id>purchase_orders, warehouse_id>warehouses, "
            "received_date:d, quantity_received:i",
            "carriers: carrier_id:i, carrier_name:t, transport_mode:t",
            "shipments: shipment_id:i, warehouse_id>warehouses, carrier_id>carriers, ship_date:d, "
            "delivery_date:d, shipment_status:t, freight_cost:m",
            "shipment_lines: shipment_line_id:i, shipment_id>shipments, item_id>items, quantity_shipped:i",
            "stock_transfers: transfer_id:i, from_warehouse_id>warehouses, to_warehouse_id>warehouses, "
            "item_id>items, quantity:i, transfer_date:d",
            "cycle_counts: count_id:i, warehouse_id>warehouses, item_id>items, count_date:d, variance:i",
            "bins: bin_id:i, warehouse_id>warehouses, aisle:t, bin_capacity:i",
            "demand_forecasts: demand_forecast_id:i, item_id>items, forecast_month:t, forecast_quantity:i",
            "returns_to_vendor: rtv_id:i, supplier_id>suppliers, item_id>items, quantity:i, reason:t",
            "freight_rates: freight_rate_id:i, carrier_id>carriers, lane:t, rate_per_kg:m",
        ),
    ),
    WideSource(
        id="ecommerce",
        engine="sqlite",
        description=("The online store: shoppers (customers) and their addresses, the product "
                     "catalog with categories and prices, carts, orders and order items, store "
                     "invoices, refunds, promotions and coupons, and product reviews."),
        sample_questions=(
            "What are the best selling products this year?",
            "How many orders used a coupon?",
            "Which product categories get the lowest review ratings?",
            "How many carts were abandoned?",
        ),
        tables=(
            "customers: customer_id:i, first_name:t, last_name:t, email:t, signup_date:d, loyalty_tier:t",
            "addresses: address_id:i, customer_id>customers, city:t, country:t, postal_code:t",
            "products: product_id:i, product_name:t, category_id>categories, list_price:m, brand:t",
            "categories: category_id:i, category_name:t",
            "orders: order_id:i, customer_id>customers, order_date:d, order_status:t, order_total:m, "
            "coupon_id>coupons",
            "order_items: order_item_id:i, order_id>orders, product_id>products, quantity:i, unit_price:m",
            "carts: cart_id:i, customer_id>customers, created_date:d, abandoned:i",
            "cart_items: cart_item_id:i, cart_id>carts, product_id>products, quantity:i",
            "invoices: invoice_id:i, order_id>orders, invoice_date:d, amount_due:m",
            "refunds: refund_id:i, order_id>orders, refund_date:d, refund_amount:m, refund_reason:t",
            "promotions: promotion_id:i, promotion_name:t, discount_percent:i, start_date:d",
            "coupons: coupon_id:i, promotion_id>promotions, coupon_code:t, times_used:i",
            "product_reviews: review_id:i, product_id>products, customer_id>customers, stars:i, review_date:d",
            "wishlists: wishlist_id:i, customer_id>customers, product_id>products, added_date:d",
            "product_prices: price_id:i, product_id>products, valid_from:d, price:m",
            "gift_cards: gift_card_id:i, customer_id>customers, initial_value:m, remaining_value:m",
        ),
    ),
    WideSource(
        id="support_desk",
        engine="duckdb",
        description=("Customer support: the support agents and their teams, customers who contact "
                     "support, tickets with priority and status, replies, service-level targets "
                     "and breaches, satisfaction surveys, knowledge base articles and call logs."),
        sample_questions=(
            "How many tickets are still open per priority?",
            "Which agents resolve tickets fastest?",
            "What is our average satisfaction score per team?",
            "How many tickets breached their service level?",
        ),
        tables=(
            "agents: agent_id:i, agent_name:t, team_id>teams, hire_date:d, agent_level:t",
            "teams: team_id:i, team_name:t, shift:t",
            "customers: customer_id:i, customer_name:t, email:t, plan:t, country:t",
            "tickets: ticket_id:i, customer_id>customers, agent_id>agents, opened_date:d, closed_date:d, "
            "priority:t, ticket_status:t, ticket_channel:t",
            "ticket_replies: reply_id:i, ticket_id>tickets, agent_id>agents, reply_date:d, is_public:i",
            "sla_policies: sla_policy_id:i, priority:t, first_response_hours:i, resolution_hours:i",
            "sla_breaches: breach_id:i, ticket_id>tickets, sla_policy_id>sla_policies, breach_type:t",
            "satisfaction_surveys: survey_id:i, ticket_id>tickets, score:i, survey_date:d",
            "kb_articles: article_id:i, title:t, article_category:t, view_count:i, author_agent_id>agents",
            "call_logs: call_id:i, agent_id>agents, customer_id>customers, call_date:d, duration_seconds:i",
            "ticket_tags: ticket_tag_id:i, ticket_id>tickets, tag:t",
            "escalations: escalation_id:i, ticket_id>tickets, escalated_to:t, escalation_date:d",
            "agent_schedules: schedule_id:i, agent_id>agents, work_date:d, shift_hours:i",
            "macros: macro_id:i, macro_name:t, times_used:i",
            "chat_sessions: chat_id:i, customer_id>customers, agent_id>agents, started_date:d, "
            "messages_count:i",
            "product_areas: product_area_id:i, area_name:t, owner_team_id>teams",
        ),
    ),
)

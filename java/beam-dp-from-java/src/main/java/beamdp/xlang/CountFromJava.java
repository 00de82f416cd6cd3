package beamdp.xlang;

import java.util.Arrays;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.extensions.python.PythonExternalTransform;
import org.apache.beam.sdk.io.TextIO;
import org.apache.beam.sdk.options.Default;
import org.apache.beam.sdk.options.Description;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.schemas.Schema;
import org.apache.beam.sdk.transforms.Create;
import org.apache.beam.sdk.transforms.MapElements;
import org.apache.beam.sdk.values.PCollection;
import org.apache.beam.sdk.values.PCollectionTuple;
import org.apache.beam.sdk.values.Row;
import org.apache.beam.sdk.values.TimestampedValue;
import org.apache.beam.sdk.values.TypeDescriptors;
import org.joda.time.Instant;

/**
 * A Java pipeline applying beam_dp's ContinualCountPerKey (Python) by field names through a
 * Python expansion service: schema'd rows (page, user) stamped in 3 one-second steps, noisy counts
 * per page written as text. See docs/configuration.md ("From Java").
 */
public class CountFromJava {

  /** Options of this pipeline. */
  public interface Options extends PipelineOptions {
    @Description("host:port of the Python expansion service")
    @Default.String("localhost:8097")
    String getPythonExpansionService();

    void setPythonExpansionService(String value);

    @Description("output prefix of the releases")
    @Default.String("/tmp/beam_dp_java/releases")
    String getOutput();

    void setOutput(String value);
  }

  public static void main(String[] args) {
    Options options = PipelineOptionsFactory.fromArgs(args).withValidation().as(Options.class);
    Pipeline p = Pipeline.create(options);
    Schema schema = Schema.builder().addStringField("page").addStringField("user").build();
    String[][] views = {
      {"home", "u1", "500"}, {"home", "u2", "700"}, {"search", "u1", "1500"},
      {"home", "u3", "2500"}, {"checkout", "u4", "2600"}
    };
    TimestampedValue<Row>[] stamped = Arrays.stream(views)
        .map(v -> TimestampedValue.of(Row.withSchema(schema).addValues(v[0], v[1]).build(),
                                      new Instant(Long.parseLong(v[2]))))
        .toArray(TimestampedValue[]::new);
    PCollection<Row> rows = p.apply("Views", Create.timestamped(Arrays.asList(stamped)))
        .setRowSchema(schema);

    Schema budget = Schema.builder().addDoubleField("epsilon").build();
    Schema noiseKey =
        Schema.builder().addStringField("reference").addStringField("stream_id").build();
    // The transform's arguments as one schema'd row (field names, budget and noise key as
    // nested rows): what the YAML provider's factory takes.
    Schema kwargsSchema = Schema.builder()
        .addArrayField("public_keys", Schema.FieldType.STRING)
        .addStringField("key_field")
        .addInt64Field("start")
        .addInt64Field("step")
        .addInt64Field("end")
        .addRowField("budget", budget)
        .addRowField("noise_key", noiseKey)
        .build();
    Row kwargs = Row.withSchema(kwargsSchema)
        .addValues(Arrays.asList("home", "search"), "page", 0L, 1L, 3L,
                   Row.withSchema(budget).addValue(1.0).build(),
                   Row.withSchema(noiseKey).addValues("env:BEAM_DP_NOISE_KEY", "java_views")
                       .build())
        .build();
    PCollectionTuple out = rows.apply("Count",
        PythonExternalTransform.<PCollection<Row>, PCollectionTuple>from(
                "beam_dp.transforms.yaml_provider.ContinualCountPerKey",
                options.getPythonExpansionService())
            .withKwargs(kwargs));
    PCollection<Row> releases = out.get("releases");
    releases
        .apply("Format", MapElements.into(TypeDescriptors.strings())
            .via((Row r) -> r.getString("key") + "," + r.getInt64("step") + ","
                 + r.getDouble("value")))
        .apply("Write", TextIO.write().to(options.getOutput()).withoutSharding());
    p.run().waitUntilFinish();
  }
}

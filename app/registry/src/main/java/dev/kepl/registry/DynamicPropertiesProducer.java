package dev.kepl.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

/**
 * The list of properties that may change at run time. The Quarkus extension that builds
 * it is not on Maven Central (see pom.xml); kepl's registry changes none at run time.
 */
public class DynamicPropertiesProducer {

    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicProperties() {
        return new DynamicConfigPropertyList(List.of());
    }
}
